// Package platformtest runs the platform packages' table tests: each case
// is a file of platform objects (the VM and the Secrets and ConfigMaps it
// refers to), converted as vminit build converts it, and either the
// problems it must report or checks of the spec it must give.
package platformtest

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/convert"
	"github.com/vminit/vminit/spec"
)

// Case is one conversion.
type Case struct {
	Name string
	// Doc is the file's text; problems name it vm.yaml.
	Doc  string
	Opts platform.Options
	// Check looks at the result; s is nil when the result has no spec
	// (a Windows VM's sysprep disc alone).
	Check func(t *testing.T, s *spec.Spec, r *platform.Result)
	// Errs must each appear in the error (and there must be one, matching
	// spec.ErrInvalid); Warns each in a warning (and, when none is given,
	// there must be no warning).
	Errs, Warns []string
}

// Run runs the cases, each as a subtest.
func Run(t *testing.T, cases []Case) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			r, err := Convert(t, c.Doc, c.Opts)
			if len(c.Errs) > 0 {
				if err == nil {
					t.Fatalf("converted without error: %s", r.Spec)
				}
				if !errors.Is(err, spec.ErrInvalid) {
					t.Errorf("not spec.ErrInvalid: %v", err)
				}
				for _, w := range c.Errs {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error lacks %q:\n%v", w, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ws := strings.Join(r.Warnings, "\n")
			for _, w := range c.Warns {
				if !strings.Contains(ws, w) {
					t.Errorf("warnings lack %q:\n%s", w, ws)
				}
			}
			if len(c.Warns) == 0 && ws != "" {
				t.Errorf("unexpected warnings:\n%s", ws)
			}
			if c.Check != nil {
				var s *spec.Spec
				if r.Instance != nil {
					s = &r.Instance.Spec
				}
				c.Check(t, s, r)
			}
		})
	}
}

// Convert converts the one VM of doc.
func Convert(t *testing.T, doc string, opts platform.Options) (*platform.Result, error) {
	t.Helper()
	rs, err := convert.Read(t.Context(), "vm.yaml", []byte(doc), opts)
	if err != nil {
		return nil, err
	}
	if len(rs) != 1 {
		t.Fatalf("%d VMs converted, want 1", len(rs))
	}
	return rs[0], nil
}

// Eq reports got unless it deeply equals want.
func Eq[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %#v, want %#v", what, got, want)
	}
}

// Indent indents every non-empty line of s by n spaces.
func Indent(s string, n int) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if strings.TrimSpace(l) != "" {
			b.WriteString(strings.Repeat(" ", n))
		}
		b.WriteString(l)
	}
	return b.String()
}
