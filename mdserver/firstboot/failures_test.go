package firstboot

import "testing"

// TestReportExplainsEventFailure: the report's failure of a module the
// events already said failed (result.json names no stage) gives that
// failure its message, rather than a second row; another module's
// failure is a row of its own, and so is each failure of a stage alone.
func TestReportExplainsEventFailure(t *testing.T) {
	tr := New(Options{Now: newClock().now})
	tr.Fetch("vm", "u", "cloud-init", "nocloud", "/nocloud/meta-data")
	must(t, tr.Record("vm", "u", "cloud-init", Event{Kind: KindFinish, Name: "modules-final/config-scripts-user", Result: ResultFail, Message: "running config-scripts-user with frequency once-per-instance"}))
	must(t, tr.Record("vm", "u", "cloud-init", finish("modules-final", ResultFail)))
	tr.Report("vm", "u", "cloud-init", Report{Failed: true, Errors: []Failure{
		{Module: "config-scripts-user", Message: "RuntimeError('Runparts: 1 failures in 1 attempted commands')"},
		{Module: "config-runcmd", Message: "OSError()"},
		{Stage: "init-network", Message: "no datasource"},
		{Stage: "init-network", Message: "another"},
	}})
	st := tr.Status("vm", "u", "cloud-init")
	want := []Failure{
		{Stage: "modules-final", Module: "config-scripts-user", Message: "RuntimeError('Runparts: 1 failures in 1 attempted commands')"},
		{Module: "config-runcmd", Message: "OSError()"},
		{Stage: "init-network", Message: "no datasource"},
		{Stage: "init-network", Message: "another"},
	}
	if len(st.Errors) != len(want) || st.Errors[0] != want[0] || st.Errors[1] != want[1] || st.Errors[3] != want[3] {
		t.Errorf("failures %+v\nwant %+v", st.Errors, want)
	}
}
