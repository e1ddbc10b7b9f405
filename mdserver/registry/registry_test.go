package registry

import (
	"errors"
	"log/slog"
	"net/netip"
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
	out, refused := resolveChanges(served, map[string]*Record{"b.yaml": b2, "c.yaml": c}, []string{"c.yaml", "b.yaml"})
	if len(refused) != 0 || out["c.yaml"] != c || out["b.yaml"] != b2 {
		t.Errorf("batch: %v %v", out, refused)
	}
	// A newcomer on an incumbent's address is refused; the incumbent keeps
	// serving its previous version when its own change is refused.
	a2 := record(t, "a", "10.0.0.3")
	out, refused = resolveChanges(out, map[string]*Record{"a.yaml": a2}, []string{"a.yaml"})
	if !errors.Is(refused["a.yaml"], ErrAddressConflict) || out["a.yaml"] != a {
		t.Errorf("refusal: %v %v", out, refused)
	}
	// Deletion.
	out, _ = resolveChanges(out, map[string]*Record{"a.yaml": nil}, []string{"a.yaml"})
	if _, ok := out["a.yaml"]; ok || len(out) != 2 {
		t.Errorf("delete: %v", out)
	}
}

// TestIndex: versions that do not load are logged with every problem
// and leave the last good version served; a refused version is logged
// once per reason, retried at every change, and served once it can be.
func TestIndex(t *testing.T) {
	var logs strings.Builder
	ix := NewIndex(IndexOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil)), KeyAttr: "file", Invalid: "invalid", Refused: "refused"})
	a, b := record(t, "a", "10.0.0.1"), record(t, "b", "10.0.0.2")
	if !ix.Apply([]Change{{Key: "a.yaml", Record: a}, {Key: "b.yaml", Record: b}}) || ix.Snapshot().Len() != 2 {
		t.Fatalf("first load: %v", ix.Snapshot().Names())
	}
	if ix.Apply([]Change{{Key: "a.yaml", Record: record(t, "a", "10.0.0.1")}}) {
		t.Error("a version already served changed the snapshot")
	}

	// Invalid: every field error, without the file name; a keeps serving.
	fe := &spec.FieldError{File: "a.yaml", Field: "spec.hostname", Message: "bad"}
	ix.Apply([]Change{{Key: "a.yaml", Err: spec.Errors{fe}}})
	if l := logs.String(); !strings.Contains(l, "msg=invalid file=a.yaml problem1=\"spec.hostname: bad\"") || !strings.Contains(l, "last good version") || fe.File != "a.yaml" {
		t.Errorf("invalid version logged as:\n%s", l)
	}
	ix.Apply([]Change{{Key: "c.yaml", Err: errors.New("read: EIO")}})
	if l := logs.String(); !strings.Contains(l, "file=c.yaml err=\"read: EIO\" serving=\"nothing from this file\"") {
		t.Errorf("a plain error logged as:\n%s", l)
	}
	if r, _ := ix.Snapshot().ByName("a"); r != a {
		t.Error("the last good version is not served")
	}

	// Refused: logged once for a standing reason, again for a new one.
	thief := record(t, "thief", "10.0.0.2")
	ix.Apply([]Change{{Key: "t.yaml", Record: thief}})
	ix.Apply([]Change{{Key: "z.yaml", Record: record(t, "z", "10.0.0.9")}})
	if n := strings.Count(logs.String(), "msg=refused"); n != 1 {
		t.Errorf("a standing refusal logged %d times:\n%s", n, logs.String())
	}
	if rec, err := ix.Pending("t.yaml"); rec != thief || !errors.Is(err, ErrAddressConflict) {
		t.Errorf("Pending = %v, %v", rec, err)
	}
	if err := ix.Check("u.yaml", record(t, "u", "10.0.0.1")); !errors.Is(err, ErrAddressConflict) {
		t.Errorf("Check of a taken address: %v", err)
	}
	if err := ix.Check("b2.yaml", record(t, "b", "10.0.0.7"), "b.yaml"); err != nil {
		t.Errorf("Check of a move to another key: %v", err)
	}
	// b going away lets the refused version in.
	ix.Apply([]Change{{Key: "b.yaml"}})
	if r, ok := ix.Snapshot().ByAddr(netip.MustParseAddr("10.0.0.2")); !ok || r != thief {
		t.Errorf("10.0.0.2 → %v after b left", r)
	}
	if rec, _ := ix.Pending("t.yaml"); rec != nil || ix.Served("t.yaml") != thief {
		t.Error("the served version is still pending")
	}
	if k, ok := ix.KeyOf("thief"); !ok || k != "t.yaml" {
		t.Errorf("KeyOf = %q %v", k, ok)
	}
}
