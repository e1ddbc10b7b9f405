package run

import (
	"cmp"
	"slices"
	"testing"

	"github.com/vminit/vminit/mdserver"
)

// TestDialectsFromRegistry: vminit run offers each agent exactly the
// dialects the registry says it reads, in the registry's order, under the
// agent's name for them; a new dialect (the toy of mdserver's
// TestToyDialectInEveryProgram) needs no edit here.
func TestDialectsFromRegistry(t *testing.T) {
	want := map[string][]string{}
	for _, d := range mdserver.Dialects() {
		for _, r := range d.Readers {
			want[r.Agent] = append(want[r.Agent], cmp.Or(r.As, d.Name))
		}
	}
	got := Dialects()
	for agent, names := range want {
		if !slices.Equal(got[agent], names) {
			t.Errorf("%s: vminit run offers %v, the registry %v", agent, got[agent], names)
		}
	}
	if len(got) != len(want) {
		t.Errorf("vminit run offers dialects to %d agents, the registry to %d", len(got), len(want))
	}
}
