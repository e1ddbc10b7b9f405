package registry

import (
	"errors"
	"fmt"
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
	ix := NewIndex(IndexOptions{})
	ix.resolve(map[string]*Record{"a.yaml": a, "b.yaml": b}, []string{"a.yaml", "b.yaml"}, nil)
	// b gives up its address while c takes it in the same batch: c is
	// tried first, refused, and retried after b's change.
	b2, c := record(t, "b", "10.0.0.3"), record(t, "c", "10.0.0.2")
	refused := ix.resolve(map[string]*Record{"b.yaml": b2, "c.yaml": c}, []string{"c.yaml", "b.yaml"}, nil)
	if len(refused) != 0 || ix.served["c.yaml"] != c || ix.served["b.yaml"] != b2 {
		t.Errorf("batch: %v %v", ix.served, refused)
	}
	// A newcomer on an incumbent's address is refused; the incumbent keeps
	// serving its previous version when its own change is refused.
	a2 := record(t, "a", "10.0.0.3")
	refused = ix.resolve(map[string]*Record{"a.yaml": a2}, []string{"a.yaml"}, nil)
	if !errors.Is(refused["a.yaml"], ErrAddressConflict) || ix.served["a.yaml"] != a {
		t.Errorf("refusal: %v %v", ix.served, refused)
	}
	// What is tried with undo is undone.
	var undo []func()
	before := fmt.Sprint(ix.served, ix.names, ix.addrs)
	ix.resolve(map[string]*Record{"a.yaml": nil, "d.yaml": record(t, "d", "10.0.0.1"), "b.yaml": nil}, []string{"a.yaml", "b.yaml", "d.yaml"}, &undo)
	for i := len(undo) - 1; i >= 0; i-- {
		undo[i]()
	}
	if after := fmt.Sprint(ix.served, ix.names, ix.addrs); after != before {
		t.Errorf("undo left\n%s\nwhere there was\n%s", after, before)
	}
	// Deletion.
	ix.resolve(map[string]*Record{"a.yaml": nil}, []string{"a.yaml"}, nil)
	if _, ok := ix.served["a.yaml"]; ok || len(ix.served) != 2 || len(ix.names) != 2 || len(ix.addrs) != 2 {
		t.Errorf("delete: %v %v %v", ix.served, ix.names, ix.addrs)
	}
}

// TestIndex: versions that do not load are logged with every problem
// and leave the last good version served; a refused version is logged
// once per reason, retried at every change, and served once it can be.
func TestIndex(t *testing.T) {
	var logs strings.Builder
	ix := NewIndex(IndexOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil)), KeyAttr: "file", Invalid: "invalid", Refused: "refused"})
	a, b := record(t, "a", "10.0.0.1"), record(t, "b", "10.0.0.2")
	a.Revision = "5ecre7d16e57"
	if !ix.Apply([]Change{{Key: "a.yaml", Record: a}, {Key: "b.yaml", Record: b}}) || ix.Snapshot().Len() != 2 {
		t.Fatalf("first load: %v", ix.Snapshot().Names())
	}
	again := record(t, "a", "10.0.0.1")
	again.Revision = a.Revision
	if ix.Apply([]Change{{Key: "a.yaml", Record: again}}) {
		t.Error("a version already served changed the snapshot")
	}

	// Invalid: every field error, without the file name; a keeps serving.
	// The log names no revision: it hashes what references read (Secrets).
	fe := &spec.FieldError{File: "a.yaml", Field: "spec.hostname", Message: "bad"}
	ix.Apply([]Change{{Key: "a.yaml", Err: spec.Errors{fe}}})
	if l := logs.String(); !strings.Contains(l, "msg=invalid file=a.yaml problem1=\"spec.hostname: bad\"") || !strings.Contains(l, "last good version") || strings.Contains(l, a.Revision) || fe.File != "a.yaml" {
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

// TestIndexUIDs: an instance keeps its UID through edits and moves to
// another key, and gets a new one when it is deleted and defined again,
// even with the same content; a store's own UID is kept, and a new one
// with the same content is a change.
func TestIndexUIDs(t *testing.T) {
	ix := NewIndex(IndexOptions{Logger: slog.New(slog.DiscardHandler)})
	uid := func(name string) string {
		r, ok := ix.Snapshot().ByName(name)
		if !ok {
			t.Fatalf("%s not served", name)
		}
		return r.UID
	}
	ix.Apply([]Change{{Key: "a.yaml", Record: record(t, "a", "10.0.0.1")}})
	if uid("a") != "" {
		t.Errorf("first load: UID %q, want the empty one (the same after a restart)", uid("a"))
	}
	edit := record(t, "a", "10.0.0.2")
	edit.Revision = "2"
	ix.Apply([]Change{{Key: "a.yaml", Record: edit}})
	ix.Apply([]Change{{Key: "a.yaml"}, {Key: "moved.yaml", Record: record(t, "a", "10.0.0.2")}})
	if uid("a") != "" || ix.Served("moved.yaml") == nil {
		t.Errorf("an edit and a move changed the UID to %q", uid("a"))
	}
	rec, _ := ix.Snapshot().ByName("a")
	k := rec.Key()
	ix.Apply([]Change{{Key: "moved.yaml"}})
	ix.Apply([]Change{{Key: "moved.yaml", Record: record(t, "a", "10.0.0.2")}})
	if uid("a") == "" || ix.Snapshot().Serves(k) || ix.Snapshot().Incarnation("a", "") {
		t.Errorf("deleted and defined again: UID %q, old key still served", uid("a"))
	}
	second := uid("a")
	ix.Apply([]Change{{Key: "moved.yaml"}})
	ix.Apply([]Change{{Key: "moved.yaml", Record: record(t, "a", "10.0.0.2")}})
	if uid("a") == second {
		t.Error("a third incarnation got the second's UID")
	}

	// A store's own UIDs (etcd's create revision).
	withUID := func(u string) *Record { r := record(t, "b", "10.0.0.9"); r.UID = u; return r }
	ix.Apply([]Change{{Key: "b", Record: withUID("c7")}})
	ix.Apply([]Change{{Key: "b", Record: withUID("c7")}})
	if uid("b") != "c7" {
		t.Errorf("store UID: %q", uid("b"))
	}
	if !ix.Apply([]Change{{Key: "b", Record: withUID("c9")}}) || uid("b") != "c9" {
		t.Errorf("the same content, created again: UID %q", uid("b"))
	}
}

// TestChecks: Decode runs both checks, Admit the policy alone; what they
// refuse is a version that does not load.
func TestChecks(t *testing.T) {
	var content, policy int
	ix := NewIndex(IndexOptions{Logger: slog.New(slog.DiscardHandler), Checks: Checks{
		Content: func(r *Record) error {
			content++
			if r.Instance().Spec.Hostname == "bad" {
				return spec.Errors{{Field: "spec.hostname", Message: "refused by the content check"}}
			}
			return nil
		},
		Policy: func(r *Record) error {
			policy++
			if r.Addresses[0].IsLoopback() {
				return spec.Errors{{Field: "spec.metadataServer.addresses[0]", Message: "loopback"}}
			}
			return nil
		},
	}})
	doc := func(host, addr string) []byte {
		return []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: a}\nspec:\n  hostname: " + host + "\n  metadataServer: {addresses: [" + addr + "]}\n")
	}
	if _, err := ix.Decode(doc("good", "10.0.0.1"), ""); err != nil || content != 1 || policy != 1 {
		t.Errorf("good: %v (%d, %d)", err, content, policy)
	}
	if _, err := ix.Decode(doc("bad", "10.0.0.1"), ""); err == nil || !strings.Contains(err.Error(), "refused by the content check") {
		t.Errorf("bad content: %v", err)
	}
	if _, err := ix.Decode(doc("good", "127.0.0.1"), ""); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("loopback: %v", err)
	}
	content = 0
	if err := ix.Admit(record(t, "c", "127.0.0.5")); err == nil || content != 0 {
		t.Errorf("Admit: %v, content check run %d times", err, content)
	}
}
