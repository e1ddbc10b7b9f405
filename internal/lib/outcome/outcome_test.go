package outcome

import "testing"

func TestRecordReportsChanges(t *testing.T) {
	var l Last
	for i, c := range []struct {
		why     string
		changed bool
		failing bool
	}{
		{"", false, false},      // went through, as it had
		{"refused", true, true}, // starts failing
		{"refused", false, true},
		{"timeout", true, true}, // fails another way
		{"", true, false},       // back
		{"", false, false},
	} {
		if got := l.Record(c.why); got != c.changed {
			t.Errorf("%d: Record(%q) = %v, want %v", i, c.why, got, c.changed)
		}
		if got := l.Failing(); got != c.failing {
			t.Errorf("%d: Failing() = %v, want %v", i, got, c.failing)
		}
	}
}
