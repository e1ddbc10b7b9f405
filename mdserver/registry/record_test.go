package registry

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vminit/vminit/spec"
)

const lazyDoc = `apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata:
  name: vm-a
spec:
  hostname: a
  files:
    - path: /etc/motd
      content: "hi\n"
  metadataServer:
    addresses: [10.0.0.1, "::ffff:10.0.0.9"]
`

// TestDecodeDeferredHoldsTheDocument: a record read for a deferred check
// holds its document, indexed by the name, addresses and revision a full
// decode gives; the background pass's check (Verify) decodes it and drops
// what it decoded, and the first Instance decodes it again and keeps it;
// a lookup's check keeps what it decoded.
func TestDecodeDeferredHoldsTheDocument(t *testing.T) {
	checked := 0
	ix := NewIndex(IndexOptions{Checks: Checks{Content: func(r *Record) error {
		checked++
		if r.Instance().Spec.Hostname != "a" {
			t.Errorf("the check saw hostname %q", r.Instance().Spec.Hostname)
		}
		return nil
	}}})
	rec, err := ix.DecodeDeferred([]byte(lazyDoc), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	full, err := DecodeDocument([]byte(lazyDoc), "")
	if err != nil {
		t.Fatal(err)
	}
	if rec.doc == nil || rec.inst.Load() != nil {
		t.Fatal("the document was decoded at once")
	}
	if rec.Name != full.Name || !slices.Equal(rec.Addresses, full.Addresses) || rec.Revision != full.Revision {
		t.Errorf("indexed as %q %v %s; a full decode gives %q %v %s", rec.Name, rec.Addresses, rec.Revision, full.Name, full.Addresses, full.Revision)
	}
	if ran, _ := rec.Checked(); ran {
		t.Error("checked before Verify")
	}
	if err := rec.Verify(); err != nil || checked != 1 {
		t.Fatalf("Verify: %v, %d checks", err, checked)
	}
	if rec.inst.Load() != nil || rec.deferred.Load() != nil {
		t.Error("the check kept the decoded spec or itself")
	}
	if ran, err := rec.Checked(); !ran || err != nil {
		t.Errorf("Checked after a passed check: %v %v", ran, err)
	}
	if got := rec.Instance(); got.Spec.Hostname != "a" || rec.inst.Load() != got {
		t.Errorf("Instance: %q, kept: %v", got.Spec.Hostname, rec.inst.Load() == got)
	}
	if checked != 1 {
		t.Errorf("%d checks", checked)
	}
	// A lookup checks the record and keeps what it decoded: the guest
	// that asked renders it next.
	looked, err := ix.DecodeDeferred([]byte(lazyDoc), "")
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := mustSnapshot(t, looked).ByAddr(netip.MustParseAddr("10.0.0.9")); !ok || r.inst.Load() == nil || checked != 2 {
		t.Errorf("a lookup: found %v, kept %v, %d checks", ok, looked.inst.Load() != nil, checked)
	}
}

// TestDecodeDeferredReportsWhatParseFinds: a document read for a deferred
// check that Parse refuses fails its check with Parse's errors, each
// naming its field and line; one that reads a files[].source.file, or
// that spec.Identify declines, is decoded at once.
func TestDecodeDeferredReportsWhatParseFinds(t *testing.T) {
	ix := NewIndex(IndexOptions{})
	bad := strings.Replace(lazyDoc, "  hostname: a\n", "  hostname: a\n  hostnme: b\n  users:\n    - sudo: x\n", 1)
	rec, err := ix.DecodeDeferred([]byte(bad), "")
	if err != nil || rec.doc == nil {
		t.Fatalf("not deferred: %v", err)
	}
	es := spec.AsErrors(rec.Verify())
	if len(es) != 2 || es[0].Field != "spec.hostnme" || es[0].Line != 7 || es[1].Field != "spec.users[0].name" || es[1].Line != 9 {
		t.Errorf("Verify: %v", es)
	}
	if ran, err := rec.Checked(); !ran || err == nil {
		t.Errorf("Checked after a failed check: %v %v", ran, err)
	}
	if _, ok := mustSnapshot(t, rec).ByAddr(netip.MustParseAddr("10.0.0.1")); ok {
		t.Error("a record that fails its check was found")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "motd"), []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for what, doc := range map[string]string{
		"source.file":        strings.Replace(lazyDoc, `      content: "hi\n"`, "      source:\n        file: motd", 1),
		"userDataFrom":       strings.Replace(lazyDoc, "  hostname: a\n", "  hostname: a\n  cloudInit:\n    userDataFrom: {file: motd}\n", 1),
		"an escaped key":     strings.Replace(lazyDoc, "  hostname: a\n", "  \"hostn\\x61me\": a\n", 1),
		"a flow mapping":     strings.Replace(lazyDoc, "metadata:\n  name: vm-a\n", "metadata: {name: vm-a}\n", 1),
		"a mapping on lines": strings.Replace(lazyDoc, "  hostname: a\n", "  labels: {a: 'b\n    c'}\n", 1),
	} {
		rec, err := ix.DecodeDeferred([]byte(doc), dir)
		switch {
		case rec != nil && rec.doc != nil:
			t.Errorf("%s: deferred", what)
		case what == "source.file" || what == "userDataFrom":
			full, err2 := DecodeDocument([]byte(doc), dir)
			if err != nil || err2 != nil || rec.Revision != full.Revision {
				t.Errorf("%s: %v, %v", what, err, err2)
			}
		}
	}
}

func mustSnapshot(t *testing.T, recs ...*Record) *Snapshot {
	t.Helper()
	s, err := NewSnapshot(recs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAgentKeepsNoSpec: a fleet's summary asks every record its agent; an
// idle record answers it without keeping its decoded spec, and the second
// time without decoding.
func TestAgentKeepsNoSpec(t *testing.T) {
	for _, agent := range []string{spec.AgentIgnition, spec.AgentCloudbaseInit} {
		doc := []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata:\n  name: fc\nspec:\n  agent: " + agent + "\n  metadataServer:\n    addresses: [192.0.2.7]\n")
		r, err := NewIndex(IndexOptions{}).DecodeDeferred(doc, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Verify(); err != nil {
			t.Fatal(err)
		}
		if a := r.Agent(); a != agent {
			t.Fatalf("agent %q", a)
		}
		if r.inst.Load() != nil {
			t.Error("Agent kept the decoded spec")
		}
		r.doc = nil // a second decode would now panic
		if a := r.Agent(); a != agent {
			t.Fatalf("agent %q the second time", a)
		}
	}
}
