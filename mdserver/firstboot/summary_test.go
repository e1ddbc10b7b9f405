package firstboot

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestChangesApply: a reader holding one summary that applies the
// changes to another holds the other, whatever rows were added, removed
// or changed; a page after a name starts past it.
func TestChangesApply(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	fleet := func() Summary {
		var rows []Status
		for i := range 40 {
			if rnd.IntN(3) > 0 {
				rows = append(rows, Status{Name: fmt.Sprintf("vm-%02d", i), State: States[rnd.IntN(len(States))]})
			}
		}
		return Counted(rows)
	}
	for range 200 {
		a, b := fleet(), fleet()
		ch := b.Changes(a)
		a.Apply(ch)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("applied %+v:\n got %+v\nwant %+v", ch, a, b)
		}
		if ch := b.Changes(b); !ch.Unchanged(b.Counts) {
			t.Fatalf("changes of a summary since itself: %+v", ch)
		}
	}
	sum := Counted([]Status{{Name: "a"}, {Name: "b"}, {Name: "c"}})
	for _, tc := range []struct {
		after, first, cont string
		n                  int
	}{{"", "a", "b", 2}, {"b", "c", "", 1}, {"ab", "b", "", 2}, {"c", "", "", 0}} {
		p := sum.Page(tc.after, 2)
		first := ""
		if len(p.Instances) > 0 {
			first = p.Instances[0].Name
		}
		if first != tc.first || p.Continue != tc.cont || len(p.Instances) != tc.n {
			t.Errorf("page after %q: %+v", tc.after, p)
		}
	}
}

// TestStatusWhere: the stage column's one rule (the CLI's table and the
// web page both show Where): where a running or stalled boot is, what a
// failed one failed in, nothing for one not started or done.
func TestStatusWhere(t *testing.T) {
	fail := []Failure{{Stage: "modules-final", Module: "config-scripts-user", Message: "exit 1"}}
	for _, tc := range []struct {
		st   Status
		want string
	}{
		{Status{State: Pending}, ""},
		{Status{State: Fetched}, ""},
		{Status{State: Running, Stage: "modules-config", Module: "config-locale"}, "modules-config/config-locale"},
		{Status{State: Stalled, Stage: "init-network"}, "init-network"},
		{Status{State: Done, Stage: "modules-final", Module: "config-final-message"}, ""},
		{Status{State: Failed, Stage: "modules-final", Module: "config-final-message", Errors: fail}, "modules-final/config-scripts-user"},
		{Status{State: Failed, Stage: "boot", Errors: []Failure{{Unit: "app.service"}}}, "app.service"},
		{Status{State: Failed, Stage: "boot"}, "boot"},
		{Status{State: Pending, Agent: "cloudbase-init", NoReport: true}, "cloudbase-init sends no first-boot report"},
		{Status{State: Fetched, Agent: "cloudbase-init", NoReport: true}, "cloudbase-init sends no first-boot report"},
	} {
		if got := tc.st.Where(); got != tc.want {
			t.Errorf("%+v: Where %q, want %q", tc.st, got, tc.want)
		}
	}
}
