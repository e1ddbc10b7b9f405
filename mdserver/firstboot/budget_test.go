package firstboot_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/bench/mdbench"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// hostileBoot drives one boot as the hostile guest does: 64
// events of maximal, unique names and messages, then a report of 20
// failures of 2 KiB each.
func hostileBoot(t testing.TB, tr *firstboot.Tracker, name string) {
	t.Helper()
	for i := range firstboot.MaxEvents {
		ev := firstboot.Event{Kind: firstboot.KindStart, Name: fmt.Sprintf("%s/%03d%s", name, i, strings.Repeat("n", firstboot.MaxName)),
			Message: fmt.Sprintf("%s %03d %s", name, i, strings.Repeat("m", firstboot.MaxMessage))}
		if err := tr.Record(name, "uid", firstboot.AgentCloudInit, ev); err != nil {
			t.Fatal(err)
		}
	}
	var r firstboot.Report
	r.Failed = true
	for i := range 20 {
		r.Errors = append(r.Errors, firstboot.Failure{Stage: strings.Repeat("s", firstboot.MaxName), Module: fmt.Sprintf("m%02d%s", i, strings.Repeat("m", firstboot.MaxName)),
			Message: fmt.Sprintf("failure %02d of %s\n%s", i, name, strings.Repeat("x", firstboot.MaxMessage))})
	}
	tr.Report(name, "uid", firstboot.AgentCloudInit, r)
}

// TestTextBudget: whatever a guest posts, its boot keeps at most firstboot.MaxText
// bytes of its text, and the first failure whole; an honest boot loses
// nothing to the budget.
func TestTextBudget(t *testing.T) {
	tr := firstboot.New(firstboot.Options{})
	hostileBoot(t, tr, "vm-hostile")
	st := tr.Status("vm-hostile", "uid", firstboot.AgentCloudInit)
	if n := firstboot.TextOf(&st); n > firstboot.MaxText {
		t.Errorf("a hostile boot keeps %d bytes of guest text, want at most %d", n, firstboot.MaxText)
	}
	if st.State != firstboot.Failed || len(st.Errors) == 0 || !strings.HasPrefix(st.Errors[0].Message, "failure 00 of vm-hostile\n") || len(st.Errors[0].Message) != firstboot.MaxMessage {
		t.Errorf("the first failure is not kept whole: %s, %d errors", st.State, len(st.Errors))
	}
	if n := len(st.Events); n == 0 || st.Events[n-1].Kind != firstboot.KindReport {
		t.Errorf("the report's event is not the last kept (%d events)", n)
	}

	// An honest boot, and one that failed with cloud-init's own report
	// and its log's tail, keep everything they posted.
	for _, failed := range []bool{false, true} {
		name := fmt.Sprintf("vm-honest-%t", failed)
		for _, body := range mdbench.CloudInitEvents() {
			ev, err := firstboot.ParseCloudInitEvent(body)
			if err != nil {
				t.Fatal(err)
			}
			if err := tr.Record(name, "uid", firstboot.AgentCloudInit, ev); err != nil {
				t.Fatal(err)
			}
		}
		events := len(tr.Status(name, "uid", firstboot.AgentCloudInit).Events)
		if failed {
			r, err := firstboot.GuestReport{Agent: firstboot.AgentCloudInit, Result: []byte(`{"v1": {"errors": ["('scripts-user', RuntimeError('Runparts: 1 failures'))"]}}`),
				Log: strings.Repeat("a line of cloud-init-output.log\n", 200)}.Report()
			if err != nil {
				t.Fatal(err)
			}
			tr.Report(name, "uid", firstboot.AgentCloudInit, r)
			events++
		}
		st := tr.Status(name, "uid", firstboot.AgentCloudInit)
		if n := firstboot.TextOf(&st); n > firstboot.MaxText/2 || len(st.Events) != events {
			t.Errorf("%s: %d bytes of text, %d events of %d: an honest boot near its budget", name, n, len(st.Events), events)
		}
		for _, e := range st.Events {
			if e.Message == "" && e.Kind != firstboot.KindFetch {
				t.Errorf("%s: %s %s lost its message", name, e.Kind, e.Name)
			}
		}
	}
}

// TestBriefCarriesFirstError: a fleet row carries the first error only,
// its line that says why (firstboot.Why), at most firstboot.MaxBriefError
// bytes of message.
func TestBriefCarriesFirstError(t *testing.T) {
	tr := firstboot.New(firstboot.Options{})
	hostileBoot(t, tr, "vm-1")
	row := tr.Brief("vm-1", "uid", firstboot.AgentCloudInit)
	if len(row.Errors) != 1 || len(row.Errors[0].Message) > firstboot.MaxBriefError || strings.ContainsAny(row.Errors[0].Message, "\n\r") ||
		row.Errors[0].Message != "failure 00 of vm-1" || row.Stages != nil || row.Events != nil {
		t.Errorf("a row: %d errors, %q", len(row.Errors), row.FirstError())
	}
	if st := tr.Status("vm-1", "uid", firstboot.AgentCloudInit); len(st.Errors) < 2 || len(st.Errors[0].Message) != firstboot.MaxMessage {
		t.Errorf("the instance's status lost its errors: %d", len(st.Errors))
	}
}

// TestMergedWithinBudget: two replicas' statuses of one hostile boot, each
// within MaxText, are within it together (MergeStatus and Tracker.Merge
// hold the union to the budget as the tracker holds its own).
func TestMergedWithinBudget(t *testing.T) {
	a, b := firstboot.New(firstboot.Options{}), firstboot.New(firstboot.Options{})
	hostileBoot(t, a, "vm")
	hostileBoot(t, b, "vm")
	sa, sb := a.Status("vm", "uid", firstboot.AgentCloudInit), b.Status("vm", "uid", firstboot.AgentCloudInit)
	if m := firstboot.MergeStatus(sa, sb); firstboot.TextOf(&m) > firstboot.MaxText {
		t.Errorf("MergeStatus: %d bytes of guest text, want at most %d", firstboot.TextOf(&m), firstboot.MaxText)
	}
	a.Merge(sb)
	if st := a.Status("vm", "uid", firstboot.AgentCloudInit); firstboot.TextOf(&st) > firstboot.MaxText {
		t.Errorf("Tracker.Merge: %d bytes of guest text, want at most %d", firstboot.TextOf(&st), firstboot.MaxText)
	}
}
