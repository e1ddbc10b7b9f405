package spec

import (
	"regexp"
	"strings"
	"testing"
)

// FuzzNameChecks holds the hand-written name checks to the regular
// expressions they replace.
func FuzzNameChecks(f *testing.F) {
	labelRE := regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	userRE := regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,30}\$?$`)
	for _, s := range []string{"", "a", "-", "a-", "-a", "a-b", "web01", "A", "_", "_a$", "$", "a$$", "a\n",
		strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("u", 31) + "$", strings.Repeat("u", 32), "0ps", "o.ps", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validLabel(s), labelRE.MatchString(s); got != want {
			t.Errorf("validLabel(%q) = %v; the expression says %v", s, got, want)
		}
		if got, want := validUserName(s), userRE.MatchString(s); got != want {
			t.Errorf("validUserName(%q) = %v; the expression says %v", s, got, want)
		}
	})
}
