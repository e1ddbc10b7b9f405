package lazyre

import (
	"reflect"
	"testing"
)

// TestCompiledOnFirstUse: nothing is compiled by New (an invalid pattern
// does not panic there), and the methods answer as regexp's.
func TestCompiledOnFirstUse(t *testing.T) {
	bad := New(`(`)
	if bad.String() != `(` {
		t.Errorf("String %q", bad.String())
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("an invalid pattern does not panic on first use")
			}
		}()
		bad.MatchString("")
	}()

	re := New(`a(b+)`)
	if !re.MatchString("xabb") || re.MatchString("xa") {
		t.Error("MatchString")
	}
	if !re.Match([]byte("xabb")) || re.Match([]byte("xa")) {
		t.Error("Match")
	}
	if got := re.FindStringSubmatch("abb"); !reflect.DeepEqual(got, []string{"abb", "bb"}) {
		t.Errorf("FindStringSubmatch %q", got)
	}
	if got := re.FindSubmatch([]byte("ab")); len(got) != 2 || string(got[1]) != "b" {
		t.Errorf("FindSubmatch %q", got)
	}
	if got := re.FindAllSubmatchIndex([]byte("ab ab"), -1); !reflect.DeepEqual(got, [][]int{{0, 2, 1, 2}, {3, 5, 4, 5}}) {
		t.Errorf("FindAllSubmatchIndex %v", got)
	}
	if got := re.ReplaceAllString("ab abb", "<$1>"); got != "<b> <bb>" {
		t.Errorf("ReplaceAllString %q", got)
	}
	if got := re.FindAllStringSubmatch("ab abb", -1); !reflect.DeepEqual(got, [][]string{{"ab", "b"}, {"abb", "bb"}}) {
		t.Errorf("FindAllStringSubmatch %q", got)
	}
	if got := re.FindStringIndex("xab"); !reflect.DeepEqual(got, []int{1, 3}) {
		t.Errorf("FindStringIndex %v", got)
	}
	if got := re.FindAllString("ab abb", 1); !reflect.DeepEqual(got, []string{"ab"}) {
		t.Errorf("FindAllString %q", got)
	}
	if first := re.Regexp(); re.Regexp() != first {
		t.Error("compiled twice")
	}
}
