package mdserver

import (
	"errors"
	"net/netip"
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
