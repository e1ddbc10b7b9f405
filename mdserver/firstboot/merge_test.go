package firstboot

import "testing"

// TestMergeKeepsStages: a status read back from a store that keeps no
// stages (kubestore's status.firstBoot) moves the boot on without
// dropping the stages this replica saw.
func TestMergeKeepsStages(t *testing.T) {
	c := newClock()
	tr := New(Options{Now: c.now})
	tr.Fetch("web", "u1", "cloud-init", "nocloud", "/meta-data")
	must(t, tr.Record("web", "u1", "cloud-init", start("modules-config")))
	c.advance(1)
	other := Status{Name: "web", UID: "u1", Agent: "cloud-init", State: Done, Stage: "modules-final", LastEvent: c.now(), Finished: c.now()}
	if !tr.Merge(other) {
		t.Fatal("a done status of the same incarnation was not merged")
	}
	st := tr.Status("web", "u1", "")
	if st.State != Done || len(st.Stages) != 1 || st.Stages[0].Name != "modules-config" {
		t.Errorf("merged: %s, stages %+v", st.State, st.Stages)
	}
}
