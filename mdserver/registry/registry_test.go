package registry

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vminit/vminit/spec"
)

func record(t *testing.T, name string, addrs ...string) *Record {
	t.Helper()
	inst := &spec.Instance{APIVersion: spec.APIVersion, Kind: spec.Kind, Metadata: spec.Metadata{Name: name},
		Spec: spec.Spec{MetadataServer: &spec.MetadataServer{Addresses: addrs}}}
	inst.Default()
	if err := inst.Validate(); err != nil {
		t.Fatal(err)
	}
	r, err := NewRecord(inst, "1")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSnapshot(t *testing.T) {
	a, b := record(t, "a", "127.0.0.2", "::ffff:10.0.0.2"), record(t, "b", "127.0.0.3")
	s, err := NewSnapshot([]*Record{b, a})
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := s.ByAddr(netip.MustParseAddr("10.0.0.2")); !ok || r.Name != "a" {
		t.Errorf("an IPv4-mapped address is not found by its IPv4 form: %v", r)
	}
	if r, ok := s.ByAddr(netip.MustParseAddr("::ffff:127.0.0.3")); !ok || r.Name != "b" {
		t.Errorf("lookup by a mapped address: %v", r)
	}
	if _, ok := s.ByAddr(netip.MustParseAddr("127.0.0.4")); ok {
		t.Error("an unknown address resolved")
	}
	if got := s.Names(); len(got) != 2 || got[0] != "a" || s.Len() != 2 {
		t.Errorf("Names = %v", got)
	}
	if _, err := NewSnapshot([]*Record{a, record(t, "c", "127.0.0.2")}); !errors.Is(err, ErrAddressConflict) {
		t.Errorf("two instances on one address: %v", err)
	}
	if _, err := NewSnapshot([]*Record{a, a}); err == nil {
		t.Error("one name twice was accepted")
	}
}

func TestResolveChanges(t *testing.T) {
	a, b := record(t, "a", "10.0.0.1"), record(t, "b", "10.0.0.2")
	served := map[string]*Record{"a.yaml": a, "b.yaml": b}
	// b gives up its address while c takes it in the same batch: c is
	// tried first, refused, and retried after b's change.
	b2, c := record(t, "b", "10.0.0.3"), record(t, "c", "10.0.0.2")
	out, refused := ResolveChanges(served, map[string]*Record{"b.yaml": b2, "c.yaml": c}, []string{"c.yaml", "b.yaml"})
	if len(refused) != 0 || out["c.yaml"] != c || out["b.yaml"] != b2 {
		t.Errorf("batch: %v %v", out, refused)
	}
	// A newcomer on an incumbent's address is refused; the incumbent keeps
	// serving its previous version when its own change is refused.
	a2 := record(t, "a", "10.0.0.3")
	out, refused = ResolveChanges(out, map[string]*Record{"a.yaml": a2}, []string{"a.yaml"})
	if !errors.Is(refused["a.yaml"], ErrAddressConflict) || out["a.yaml"] != a {
		t.Errorf("refusal: %v %v", out, refused)
	}
	// Deletion.
	out, _ = ResolveChanges(out, map[string]*Record{"a.yaml": nil}, []string{"a.yaml"})
	if _, ok := out["a.yaml"]; ok || len(out) != 2 {
		t.Errorf("delete: %v", out)
	}
}

// TestPending: a standing refusal is reported once, a new reason again,
// and a served version clears it.
func TestPending(t *testing.T) {
	var p Pending
	var reports []string
	report := func(r string) { reports = append(reports, r) }
	p.Settle(errors.New("ignored: nothing pending"), report)
	p.Set(&Record{Name: "a"})
	p.Settle(errors.New("10.0.0.1 is claimed by b"), report)
	p.Settle(errors.New("10.0.0.1 is claimed by b"), report)
	p.Settle(errors.New("name a is claimed by c"), report)
	if want := []string{"10.0.0.1 is claimed by b", "name a is claimed by c"}; !slices.Equal(reports, want) {
		t.Errorf("reported %q, want %q", reports, want)
	}
	p.Settle(nil, report)
	if p.Record != nil || p.Refused != "" {
		t.Errorf("served, still pending: %+v", p)
	}
	fe := &spec.FieldError{File: "a.yaml", Field: "spec.hostname", Message: "bad"}
	attrs := ProblemAttrs(spec.Errors{fe})
	if len(attrs) != 2 || attrs[0] != "problem1" || strings.Contains(attrs[1].(string), "a.yaml") || fe.File != "a.yaml" {
		t.Errorf("ProblemAttrs = %q (and the error's file is now %q)", attrs, fe.File)
	}
	if attrs := ProblemAttrs(errors.New("read: EIO")); len(attrs) != 2 || attrs[0] != "err" {
		t.Errorf("ProblemAttrs of a plain error = %q", attrs)
	}
}
