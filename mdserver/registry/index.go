package registry

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/vminit/vminit/spec"
)

// Index is the state of a store whose backend holds instances as keyed
// documents: a spec file per instance (dirstore), an etcd key (etcdstore),
// a Kubernetes object. The store reads what changed and hands it to Apply;
// the Index applies the conflict rule (records being served keep their
// names and addresses), keeps each version it refuses and offers it again
// at every later change, logs every version that does not load and every
// refusal (a standing refusal once), and publishes the Snapshot of what is
// served.
//
// Snapshot may be called concurrently with anything; the other methods may
// not: a store calls them under its own lock, which also orders its
// writes with the changes it applies.
type Index struct {
	opts   IndexOptions
	snap   atomic.Pointer[Snapshot]
	served map[string]*Record // by key
	keys   map[string]*keyState
}

// IndexOptions configure an Index: its log lines, in the store's words.
type IndexOptions struct {
	// Logger receives the lines; default slog.Default().
	Logger *slog.Logger
	// KeyAttr is the attribute that names a key in log lines, and what a
	// key is ("file", "key").
	KeyAttr string
	// Invalid is the message of a line for a version that does not load,
	// Refused for one that loaded but takes a name or an address another
	// key holds.
	Invalid, Refused string
}

// keyState is what the Index knows of a key besides the record it serves.
type keyState struct {
	seq     int64
	pending *Record // the latest version, loaded but refused for now
	refused error   // why, as last logged
}

// Change is a key's new version, as the store read it.
type Change struct {
	Key string
	// Record is the new version; nil with Err nil means the key is gone.
	Record *Record
	// Err is why the new version did not load. It is logged with each
	// field error, and the key keeps serving its previous record.
	Err error
	// Seq orders the versions the conflict rule tries, lowest first: of
	// two new versions claiming one address, the lower Seq gets it (etcd's
	// mod revision: the one written first). Equal Seqs go by Key.
	Seq int64
	// Attrs are more attributes for the Invalid line (etcd's mod revision).
	Attrs []any
}

// NewIndex returns an empty Index.
func NewIndex(opts IndexOptions) *Index {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	ix := &Index{opts: opts, served: map[string]*Record{}, keys: map[string]*keyState{}}
	empty, _ := NewSnapshot(nil)
	ix.snap.Store(empty)
	return ix
}

// Snapshot returns what is served (an atomic load).
func (ix *Index) Snapshot() *Snapshot { return ix.snap.Load() }

// Apply takes the changed keys' new versions, together with every version
// refused earlier, and publishes a new snapshot when what is served
// changed (it reports whether it did). A version whose revision is
// already served changes nothing. Versions are tried in Seq order; one
// refused only because of another change in the same call is retried
// until nothing more can be applied.
func (ix *Index) Apply(changes []Change) bool {
	if len(ix.keys) == 0 {
		ix.keys = make(map[string]*keyState, len(changes)) // a first load: no rehashing on the way to 100,000
	}
	set := make(map[string]*Record, len(changes))
	for _, c := range changes {
		st := ix.keys[c.Key]
		if c.Record == nil && c.Err == nil {
			if st != nil {
				delete(ix.keys, c.Key)
				set[c.Key] = nil
			}
			continue
		}
		if st == nil {
			st = &keyState{}
			ix.keys[c.Key] = st
		}
		st.seq, st.pending, st.refused = c.Seq, nil, nil
		if c.Err != nil {
			attrs := append([]any{ix.opts.KeyAttr, c.Key}, c.Attrs...)
			attrs = append(attrs, problemAttrs(c.Err)...)
			ix.opts.Logger.Error(ix.opts.Invalid, append(attrs, "serving", ix.serving(c.Key))...)
			continue
		}
		if old := ix.served[c.Key]; old == nil || old.Revision != c.Record.Revision {
			st.pending = c.Record
		}
	}
	for k, st := range ix.keys {
		if st.pending != nil {
			set[k] = st.pending
		}
	}
	if len(set) == 0 {
		return false
	}
	order := slices.Collect(maps.Keys(set))
	slices.SortFunc(order, func(a, b string) int { return cmp.Or(cmp.Compare(ix.seq(a), ix.seq(b)), strings.Compare(a, b)) })
	served, refused := resolveChanges(ix.served, set, order)
	for k, st := range ix.keys {
		switch err := refused[k]; {
		case st.pending == nil:
		case err == nil:
			st.pending, st.refused = nil, nil
		case st.refused == nil || err.Error() != st.refused.Error():
			st.refused = err
			ix.opts.Logger.Error(ix.opts.Refused, ix.opts.KeyAttr, k, "instance", st.pending.Name, "problem", err.Error(), "serving", ix.serving(k))
		}
	}
	snap, err := NewSnapshot(slices.Collect(maps.Values(served)))
	if err != nil { // resolveChanges makes this unreachable
		ix.opts.Logger.Error("cannot index the instances; serving the last snapshot", "err", err)
		return false
	}
	ix.served = served
	ix.snap.Store(snap)
	return true
}

func (ix *Index) seq(key string) int64 {
	if st := ix.keys[key]; st != nil {
		return st.seq
	}
	return 0
}

// serving says, in a log line, what a key whose new version was not taken
// serves meanwhile.
func (ix *Index) serving(key string) string {
	if r := ix.served[key]; r != nil {
		return "the last good version (revision " + r.Revision + ")"
	}
	return "nothing from this " + ix.opts.KeyAttr
}

// Served returns the record the key serves, or nil.
func (ix *Index) Served(key string) *Record { return ix.served[key] }

// Pending returns the key's latest version when it loaded but is refused,
// and why; nil when the key serves its latest version (or it did not
// load).
func (ix *Index) Pending(key string) (*Record, error) {
	if st := ix.keys[key]; st != nil && st.pending != nil {
		return st.pending, st.refused
	}
	return nil, nil
}

// KeyOf returns the key that serves the named instance.
func (ix *Index) KeyOf(name string) (string, bool) {
	for k, r := range ix.served {
		if r.Name == name {
			return k, true
		}
	}
	return "", false
}

// Each calls f for every key and the record it serves, in no order.
func (ix *Index) Each(f func(key string, rec *Record)) {
	for k, r := range ix.served {
		f(k, r)
	}
}

// Check reports whether rec would be served from key, with the keys in
// gone removed first (a Put that moves an instance to another key), or
// the conflict it would be refused for. Stores call it before they write,
// so that a write that would be refused on load is refused up front.
func (ix *Index) Check(key string, rec *Record, gone ...string) error {
	set := map[string]*Record{key: rec}
	order := make([]string, 0, len(gone)+1)
	for _, g := range gone {
		if g != "" && g != key {
			set[g] = nil
			order = append(order, g)
		}
	}
	_, refused := resolveChanges(ix.served, set, append(order, key))
	return refused[key]
}

// resolveChanges is the conflict rule. served maps a source key (a file
// name, an etcd key) to the record currently served from it; changes maps
// keys to their new record, or to nil for a key that is gone. Records that
// are being served keep their names and addresses: a changed record that
// would take a name or an address from another key is refused (the
// newcomer loses) and that key keeps serving its previous record, if it
// had one. Changes are tried in the order of keys; a change that was
// refused only because of another change in the same batch is retried
// until nothing more can be applied.
//
// The result is the new key → record map and the refused keys with why.
func resolveChanges(served map[string]*Record, changes map[string]*Record, keys []string) (map[string]*Record, map[string]error) {
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
				err = fmt.Errorf("%w: instance %q is already defined by %s", ErrConflict, nr.Name, o)
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

// problemAttrs are the log attributes of a version that did not load:
// problem1, problem2… with each field error (without its file name: the
// store's line names the source), or err when it is not a list of field
// errors.
func problemAttrs(err error) []any {
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
