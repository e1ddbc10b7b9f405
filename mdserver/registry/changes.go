package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"

	"github.com/vminit/vminit/spec"
)

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
	inst, err := spec.Parse(doc, dir)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	h.Write(doc)
	for _, f := range inst.Spec.Files {
		h.Write([]byte{0})
		h.Write(f.Data())
	}
	return NewRecord(inst, hex.EncodeToString(h.Sum(nil))[:20])
}

// ResolveChanges is the conflict rule every store applies when its backend
// changes. served maps a source key (a file name, an etcd key) to the record
// currently served from it; changes maps keys to their new record, or to
// nil for a key that is gone. Records that are being served keep their
// names and addresses: a changed record that would take a name or an
// address from another key is refused (the newcomer loses) and that key
// keeps serving its previous record, if it had one. Changes are tried in
// the order of keys (the caller sorts them, e.g. by file name or etcd
// revision); a change that was refused only because of another change in
// the same batch is retried until nothing more can be applied.
//
// The result is the new key → record map and the refused keys with why.
func ResolveChanges(served map[string]*Record, changes map[string]*Record, keys []string) (map[string]*Record, map[string]error) {
	out := make(map[string]*Record, len(served)+len(changes))
	for k, r := range served {
		if c, changed := changes[k]; changed && c == nil {
			continue // deleted
		}
		out[k] = r
	}
	names := make(map[string]string, len(out)+len(changes))
	addrs := make(map[netip.Addr]string, len(out)+len(changes))
	claim := func(k string, r *Record) {
		names[r.Name] = k
		for _, a := range r.Addresses {
			addrs[a] = k
		}
	}
	release := func(r *Record) {
		delete(names, r.Name)
		for _, a := range r.Addresses {
			delete(addrs, a)
		}
	}
	for k, r := range out {
		claim(k, r)
	}
	pending := make([]string, 0, len(keys))
	for _, k := range keys {
		if c := changes[k]; c != nil {
			pending = append(pending, k)
		}
	}
	refused := map[string]error{}
	for progress := true; progress && len(pending) > 0; {
		progress = false
		rest := pending[:0]
		for _, k := range pending {
			nr := changes[k]
			old := out[k]
			if old != nil {
				release(old)
			}
			var err error
			if o, taken := names[nr.Name]; taken && o != k {
				err = fmt.Errorf("instance %q is already defined by %s", nr.Name, o)
			}
			for _, a := range nr.Addresses {
				if err != nil {
					break
				}
				if o, taken := addrs[a]; taken && o != k {
					err = fmt.Errorf("%w: %s is claimed by %s (instance %q)", ErrAddressConflict, a, o, out[o].Name)
				}
			}
			if err != nil {
				if old != nil {
					claim(k, old)
				}
				refused[k] = err
				rest = append(rest, k)
				continue
			}
			delete(refused, k)
			out[k] = nr
			claim(k, nr)
			progress = true
		}
		pending = rest
	}
	return out, refused
}

// Pending is what a store keeps for a source key whose latest version
// loaded but is not served: ResolveChanges refused it (another key holds
// its name or an address), and it is offered again with every change.
type Pending struct {
	Record  *Record // nil: nothing pending
	Refused string  // why, as last reported ("" before the first refusal)
}

// Set makes rec the key's pending version, or none (nil: the new version
// did not load, or is already served), and forgets the last refusal.
func (p *Pending) Set(rec *Record) { p.Record, p.Refused = rec, "" }

// Settle records ResolveChanges' verdict on the key: err is its refusal,
// or nil when Record is now served. report gets a refusal the first time
// it is seen, so that a standing conflict is logged once, not at every
// change.
func (p *Pending) Settle(err error, report func(reason string)) {
	switch {
	case p.Record == nil:
	case err == nil:
		p.Set(nil)
	case err.Error() != p.Refused:
		p.Refused = err.Error()
		report(p.Refused)
	}
}

// ProblemAttrs are the log attributes of a version that did not load:
// problem1, problem2… with each field error (without its file name: the
// store's line names the source), or err when it is not a list of field
// errors.
func ProblemAttrs(err error) []any {
	es := spec.AsErrors(err)
	if es == nil {
		return []any{"err", err}
	}
	attrs := make([]any, 0, 2*len(es))
	for i, fe := range es {
		bare := *fe
		bare.File = ""
		attrs = append(attrs, fmt.Sprintf("problem%d", i+1), bare.Error())
	}
	return attrs
}

// ServingInstead says, for a log line, what a key whose new version was
// not taken serves meanwhile; source names the key's kind ("file", "key").
func ServingInstead(r *Record, source string) string {
	if r == nil {
		return "nothing from this " + source
	}
	return "the last good version (revision " + r.Revision + ")"
}

// ErrConflict is returned by a store's Put when the document would take a
// name from another source (another file defines the instance).
var ErrConflict = errors.New("conflicting instance")

// ErrUnavailable is returned by a store's Put and Delete when its backend
// cannot be reached; the snapshot keeps being served.
var ErrUnavailable = errors.New("store backend unavailable")
