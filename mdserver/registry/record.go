package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/vminit/vminit/spec"
)

// Record is one instance as the server knows it: its loaded, defaulted
// and validated spec, and the source addresses that identify it.
type Record struct {
	// Name is the instance's metadata.name, unique in a Snapshot.
	Name string
	// Instance is the spec; never modified once in a Snapshot.
	Instance *spec.Instance
	// Addresses come from Instance.Spec.MetadataServer.Addresses, unmapped
	// (an IPv4-mapped IPv6 address is stored as IPv4).
	Addresses []netip.Addr
	// Revision changes whenever the record's content changes (a content
	// hash or a store revision); caches of rendered data key on it.
	Revision string
	// UID identifies this incarnation of the instance: it changes when
	// the instance is deleted and defined again, even with the same
	// content, and not when its spec changes. State a server keeps for a
	// guest (its OpenStack password, its IMDSv2 tokens) is bound to it, so
	// that a successor never inherits its predecessor's. A store that has
	// such an identity sets it (etcd: the key's create revision, which
	// every replica agrees on); Index gives one to the records that have
	// none (see Index.Apply).
	UID string

	// deferred is the content check a store deferred (Index.DecodeDeferred),
	// or nil when the record passed its checks before it was indexed.
	deferred *deferredCheck
}

// deferredCheck is a record's Checks.Content, run once, by whichever
// comes first: a request for the record or the store's background pass.
type deferredCheck struct {
	once sync.Once
	run  func(*Record) error
	err  error
	ran  atomic.Bool
}

// Verify runs the record's deferred content check, once (concurrent calls
// wait for the one running), and returns its verdict. A record checked
// before it was indexed returns nil at once. Snapshot.ByAddr and ByName
// call it: a record whose check fails is never found, so nothing
// unchecked is served.
func (r *Record) Verify() error {
	d := r.deferred
	if d == nil {
		return nil
	}
	d.once.Do(func() {
		d.err = d.run(r)
		d.ran.Store(true)
	})
	return d.err
}

// Checked reports whether every check of the record has run, and with
// what verdict, without running any.
func (r *Record) Checked() (bool, error) {
	d := r.deferred
	if d == nil {
		return true, nil
	}
	if !d.ran.Load() {
		return false, nil
	}
	return true, d.err
}

// NewRecord builds a Record from a valid instance.
func NewRecord(inst *spec.Instance, revision string) (*Record, error) {
	r := &Record{Name: inst.Metadata.Name, Instance: inst, Revision: revision}
	if ms := inst.Spec.MetadataServer; ms != nil {
		for _, a := range ms.Addresses {
			ip, err := netip.ParseAddr(a)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", r.Name, err)
			}
			r.Addresses = append(r.Addresses, ip.Unmap())
		}
	}
	return r, nil
}

// Key identifies one version of one incarnation of an instance: its name,
// UID and revision. State a server keeps for an instance that must not
// outlive it, or survive a change of its spec, is kept under its Key and
// dropped when Snapshot.Serves says the key is no longer current.
type Key struct {
	Name, UID, Revision string
}

// Key returns the record's Key.
func (r *Record) Key() Key { return Key{Name: r.Name, UID: r.UID, Revision: r.Revision} }

// DecodeDocument parses, resolves, defaults and validates one spec document
// and returns its Record, with a content hash as Revision. Every problem is
// returned together as spec.Errors, each with the line it was found on.
//
// dir is the directory files[].source.file is relative to. An empty dir
// refuses source.file altogether: documents that arrive over the admin API
// or from etcd must not make the server read its own files (a document
// naming /etc/shadow would otherwise be served to a VM). Inline the
// content with content or contentBase64 instead; `vminit instances put`
// does so for local spec files.
func DecodeDocument(doc []byte, dir string) (*Record, error) {
	return DecodeDocumentWith(spec.Loader{}, doc, dir)
}

// DecodeDocumentWith is DecodeDocument with l, whose Refs read the
// Secrets and ConfigMaps the spec refers to (a cluster's Instance, in its
// namespace). What they read counts in the Revision: a Secret's change is
// a new version.
func DecodeDocumentWith(l spec.Loader, doc []byte, dir string) (*Record, error) {
	inst, err := l.Parse(doc, dir)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	h.Write(doc)
	for _, f := range inst.Spec.Files {
		h.Write([]byte{0})
		h.Write(f.Data())
	}
	for _, v := range inst.RefData() {
		h.Write([]byte{1})
		h.Write(v)
	}
	return NewRecord(inst, hex.EncodeToString(h.Sum(nil))[:20])
}
