package registry

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vminit/vminit/spec"
)

// Record is one instance as the server knows it: its loaded, defaulted
// and validated spec, and the source addresses that identify it.
//
// A record a store read with Index.DecodeDeferred may hold its document
// alone, not yet decoded: its name and addresses are read from it
// (spec.Identify), the spec is decoded and checked by its deferred check
// (Verify), and decoded again, and kept, when it is first asked for
// (Instance). An idle fleet so holds a few hundred bytes of document an
// instance rather than its decoded spec, which is several times that
// (docs/benchmarks.md, "Beside the peers").
type Record struct {
	// Name is the instance's metadata.name, unique in a Snapshot.
	Name string
	// Addresses come from Instance().Spec.MetadataServer.Addresses,
	// unmapped (an IPv4-mapped IPv6 address is stored as IPv4).
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

	// inst is the decoded spec; never modified once in a Snapshot. For
	// a record that holds its document (doc), nil until Instance is first
	// called.
	inst atomic.Pointer[spec.Instance]
	// doc is the document of a record decoded on demand, nil for one
	// decoded at once. It reads no files[].source.file (see identify), so
	// it decodes the same without the directory it was read from.
	doc []byte

	// deferred is the check a store deferred (Index.DecodeDeferred) until
	// it has passed; nil when the record passed its checks, before it was
	// indexed or since (a passed check is dropped: an idle fleet holds
	// none).
	deferred atomic.Pointer[deferredCheck]
	// agent is spec.agent as an agentCode, once Agent has read it.
	agent atomic.Uint32
}

// Instance returns the record's spec. A record that holds its document
// decodes it here on the first call and keeps the result: the guest that
// asked for the record asks again at every request. Only a record that
// passed Verify may be asked (Snapshot.ByAddr and ByName return no
// other), so the document decodes as it did when it was checked.
func (r *Record) Instance() *spec.Instance {
	if inst := r.inst.Load(); inst != nil {
		return inst
	}
	inst := r.decodeChecked()
	r.inst.Store(inst)
	return inst
}

// Agent codes, for Record.agent.
const (
	agentUnread uint32 = iota
	agentCloudInit
	agentIgnition
	agentCloudbaseInit
)

// Agent is the instance's spec.agent. A pass over the fleet (its first
// boots' summary, every few seconds while someone watches) asks it of
// every record: it is read once, without keeping the decoded spec of an
// idle record, and kept in four bytes.
func (r *Record) Agent() string {
	switch r.agent.Load() {
	case agentCloudInit:
		return spec.AgentCloudInit
	case agentIgnition:
		return spec.AgentIgnition
	case agentCloudbaseInit:
		return spec.AgentCloudbaseInit
	}
	a := r.InstanceUnkept().Spec.Agent
	switch a {
	case spec.AgentCloudInit:
		r.agent.Store(agentCloudInit)
	case spec.AgentIgnition:
		r.agent.Store(agentIgnition)
	case spec.AgentCloudbaseInit:
		r.agent.Store(agentCloudbaseInit)
	}
	return a
}

// InstanceUnkept is Instance without keeping what it decodes: for a pass
// over every record (a store writing its start-up cache), which would
// otherwise leave the whole fleet decoded.
func (r *Record) InstanceUnkept() *spec.Instance {
	if inst := r.inst.Load(); inst != nil {
		return inst
	}
	return r.decodeChecked()
}

// decodeChecked decodes the document of a record that passed Verify.
func (r *Record) decodeChecked() *spec.Instance {
	inst, err := r.decode()
	if err != nil {
		// Verify decoded the same bytes without an error.
		panic(fmt.Sprintf("registry: instance %q was asked for before it was checked: %v", r.Name, err))
	}
	return inst
}

// decode parses, resolves, defaults and validates the record's document
// and makes sure it is the instance the record was indexed as.
func (r *Record) decode() (*spec.Instance, error) {
	inst, revision, err := decodeInstance(spec.Loader{}, r.doc, "")
	if err != nil {
		return nil, err
	}
	full, err := NewRecord(inst, revision)
	if err != nil {
		return nil, err
	}
	if full.Name != r.Name || !slices.Equal(full.Addresses, r.Addresses) || full.Revision != r.Revision {
		// spec.Identify and spec.Parse disagree: a bug, refused rather
		// than served under another name or address.
		return nil, fmt.Errorf("instance %q at %v (revision %s) was indexed as %q at %v (revision %s)",
			full.Name, full.Addresses, full.Revision, r.Name, r.Addresses, r.Revision)
	}
	return inst, nil
}

// deferredCheck is what a store deferred of a record's checks
// (Index.DecodeDeferred): decoding its document, for a record that holds
// one, and Checks.Content (run, nil for none). It runs once, by whichever
// comes first: a lookup of the record or the store's background pass.
type deferredCheck struct {
	once sync.Once
	run  func(*Record) error
	err  error
	ran  atomic.Bool
}

// Verify runs the record's deferred checks, once (concurrent calls wait
// for the one running), and returns their verdict. A record checked
// before it was indexed returns nil at once. What Verify decodes of a
// record that holds its document is dropped after: it is the store's
// background pass that calls it (the lookups keep it, see verify).
func (r *Record) Verify() error { return r.verify(false) }

// verify is Verify. With keep, the spec decoded for the checks stays, for
// the caller to use next: Snapshot.ByAddr and ByName call it so, since
// the guest that looked the record up renders it next (a record whose
// check fails is never found, so nothing unchecked is served).
func (r *Record) verify(keep bool) error {
	d := r.deferred.Load()
	if d == nil {
		return nil
	}
	d.once.Do(func() {
		d.err = r.check(d.run, keep)
		d.ran.Store(true)
		if d.err == nil {
			r.deferred.Store(nil)
		}
	})
	return d.err
}

// check runs the deferred checks: for a record that holds its document,
// that it decodes (spec.Parse's errors otherwise) to the instance the
// record was indexed as; then content, if any.
func (r *Record) check(content func(*Record) error, keep bool) error {
	if r.doc == nil {
		return content(r)
	}
	inst, err := r.decode()
	if err != nil {
		return err
	}
	if content != nil {
		// content reads the spec through Instance, from another record:
		// r may be served already, and must not hold a spec that has not
		// passed.
		checked := &Record{Name: r.Name, Addresses: r.Addresses, Revision: r.Revision}
		checked.inst.Store(inst)
		if err := content(checked); err != nil {
			return err
		}
	}
	if keep {
		r.inst.Store(inst)
	}
	return nil
}

// Checked reports whether every check of the record has run, and with
// what verdict, without running any.
func (r *Record) Checked() (bool, error) {
	d := r.deferred.Load()
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
	r := &Record{Name: inst.Metadata.Name, Revision: revision}
	r.inst.Store(inst)
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

// Moved returns a copy of r served at addrs, as revision: for a store that
// gives instances their addresses itself (kubestore's claims). r must be
// one that may be asked for its Instance (see there).
func (r *Record) Moved(addrs []netip.Addr, revision string) *Record {
	m := &Record{Name: r.Name, Addresses: addrs, Revision: revision, UID: r.UID}
	m.inst.Store(r.Instance())
	m.deferred.Store(r.deferred.Load())
	return m
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
	inst, revision, err := decodeInstance(l, doc, dir)
	if err != nil {
		return nil, err
	}
	return NewRecord(inst, revision)
}

func decodeInstance(l spec.Loader, doc []byte, dir string) (*spec.Instance, string, error) {
	inst, err := l.Parse(doc, dir)
	if err != nil {
		return nil, "", err
	}
	return inst, revisionOf(doc, inst.RefData()), nil
}

// revisionOf is the content hash of a document and of what its references
// read (files[].source, the …From fields, spec.sshHostKeys:
// Instance.RefData): the rest of its content is in the document.
// identify relies on it: a document that refers to nothing has the
// revision of its bytes alone, known before it is decoded.
func revisionOf(doc []byte, refData [][]byte) string {
	h := sha256.New()
	h.Write(doc)
	for _, v := range refData {
		h.Write([]byte{1})
		h.Write(v)
	}
	return hex.EncodeToString(h.Sum(nil)[:10]) // 20 digits, and no longer string held for them
}

// identify returns the record of a document to be decoded on demand, not
// yet decoded nor checked (DecodeDeferred gives it its check), or nil when
// the document cannot be read so: spec.Identify declines it, or it may
// refer to a value outside it (mayRefer), which would have to be read and
// hashed now.
func identify(doc []byte) *Record {
	if mayRefer(doc) {
		return nil
	}
	id, ok := spec.Identify(doc)
	if !ok {
		return nil
	}
	r := &Record{Name: id.Name, Revision: revisionOf(doc, nil), doc: doc}
	if len(id.Addresses) > 0 {
		r.Addresses = make([]netip.Addr, len(id.Addresses))
	}
	for i, a := range id.Addresses {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return nil // Parse words the error
		}
		r.Addresses[i] = ip.Unmap()
	}
	return r
}

// mayRefer reports whether a document may hold a reference
// (spec.ValueFrom: files[].source, the …From fields, spec.sshHostKeys),
// by the words their keys are spelled with, or an escape that could spell
// them in a quoted key. It errs towards yes: such a document is only
// decoded at once. Should it miss one, the deferred check finds that the
// revision differs and refuses the record (Record.decode).
func mayRefer(doc []byte) bool {
	for _, w := range referWords {
		if bytes.Contains(doc, w) {
			return true
		}
	}
	return false
}

var referWords = [][]byte{[]byte("source"), []byte("From"), []byte("sshHostKeys"), []byte("KeyRef"), []byte(`\x`), []byte(`\u`), []byte(`\U`)}
