package registry

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/vminit/vminit/spec"
)

// Index is the state of a store whose backend holds instances as keyed
// documents: a spec file per instance (dirstore), an etcd key (etcdstore),
// a Kubernetes Instance object (kubestore). The store reads what changed and hands it to Apply;
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
	opts IndexOptions
	snap atomic.Pointer[Snapshot]
	// served, names and addrs are what is served, by key, and the key
	// that holds each name and address: kept up to date change by change,
	// so that applying a change costs O(changed), not O(n).
	served  map[string]*Record
	names   map[string]string
	addrs   map[netip.Addr]string
	keys    map[string]*keyState
	pending map[string]struct{} // the keys whose keyState.pending is set
	// pendingPeak is the most keys pending has held since it was last
	// rebuilt: a Go map keeps its size once grown, and iterating it
	// costs that size (a first load leaves every key pending once).
	pendingPeak int

	applied bool   // a first Apply is done
	loaded  bool   // a first Apply has returned: the store's load is done
	uids    uint64 // the last UID given
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
	// Checks are the server's rules beyond the spec's own validation, run
	// by Decode and Admit.
	Checks Checks
	// Unaddressed, when set, is called with the names, sorted, of the
	// instances a change newly serves (Apply, or Unserve taking a refused
	// version) that no address identifies (Snapshot.Unaddressed's rule):
	// once per change of each, however often the store re-reads an
	// unchanged one. Not during the first Apply: that is the store's
	// load, which its opener sees whole in the Snapshot.
	Unaddressed func(names []string)
}

// Checks are rules a server adds to a spec's own validation, which every
// record must pass before a store serves it. A record that fails one is a
// version that does not load: it is logged with every problem, a Put
// returns the problems (the admin API answers 422), and the key keeps
// serving its last good version. Each function returns spec.Errors naming
// the field, or nil.
type Checks struct {
	// Content checks what depends on the record alone: package render's,
	// which `vminit validate` runs (the user's Ignition config parses,
	// the seed renders). It may be costly; it runs where the store
	// decodes, in parallel, once per version, and a start-up cache that
	// holds a record keeps its verdict.
	Content func(*Record) error
	// Policy checks what depends on the server's configuration too (the
	// addresses it will not serve: loopback, its trusted proxies). It runs
	// on every record, a cached one included, and must be cheap.
	Policy func(*Record) error
}

// Decode is DecodeDocument followed by the Index's Checks: what a store
// runs on each document it reads (from any goroutine).
func (ix *Index) Decode(doc []byte, dir string) (*Record, error) {
	return ix.DecodeWith(spec.Loader{}, doc, dir)
}

// DecodeWith is Decode with l (DecodeDocumentWith).
func (ix *Index) DecodeWith(l spec.Loader, doc []byte, dir string) (*Record, error) {
	rec, err := DecodeDocumentWith(l, doc, dir)
	if err != nil {
		return nil, err
	}
	if c := ix.opts.Checks.Content; c != nil {
		if err := c(rec); err != nil {
			return nil, err
		}
	}
	if err := ix.Admit(rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// DecodeDeferred is Decode with Checks.Content deferred: the record is
// indexed at once and its content check runs on first use
// (Record.Verify, which Snapshot.ByAddr and ByName call) or when the
// store's background pass reaches it, whichever is first; the store then
// calls Unserve for each record that failed. A store defers only at
// start-up, where no last good version exists to keep (docs/security.md);
// the policy check runs here, as it is cheap.
//
// Decoding the document is deferred too when spec.Identify can read its
// name and addresses (and it reads no files[].source.file): the record
// holds the document, and its deferred check decodes it first, so that a
// document Parse refuses fails its check with Parse's errors, lines and
// all. A lookup keeps what the check decoded for the guest that asked;
// the background pass drops it (Record.Instance decodes again for a
// guest that comes later), so a fleet that no guest has asked for yet
// holds its documents alone.
func (ix *Index) DecodeDeferred(doc []byte, dir string) (*Record, error) {
	rec := identify(doc)
	if rec == nil {
		var err error
		if rec, err = DecodeDocument(doc, dir); err != nil {
			return nil, err
		}
	}
	if err := ix.Admit(rec); err != nil {
		return nil, err
	}
	if rec.doc != nil || ix.opts.Checks.Content != nil {
		rec.deferred.Store(&deferredCheck{run: ix.opts.Checks.Content})
	}
	return rec, nil
}

// Unserve takes rec, which key serves and whose deferred content check
// failed with err, out of the snapshot, logged as a version that did not
// load: the key serves nothing (it had no other good version), and the
// versions refused for the names and addresses rec held are tried again.
// It reports whether rec was still served.
func (ix *Index) Unserve(key string, rec *Record, err error) bool {
	if ix.served[key] != rec {
		return false
	}
	attrs := append([]any{ix.opts.KeyAttr, key}, problemAttrs(err)...)
	ix.opts.Logger.Error(ix.opts.Invalid, append(attrs, "serving", "nothing from this "+ix.opts.KeyAttr)...)
	// A newer version of key, refused for now, is tried once rec is out.
	_, newer := ix.pending[key]
	delete(ix.pending, key)
	set := make(map[string]*Record, 1+len(ix.pending))
	set[key] = nil
	for k := range ix.pending {
		set[k] = ix.keys[k].pending
	}
	ix.publish(set)
	if newer {
		ix.pending[key] = struct{}{}
		set = make(map[string]*Record, len(ix.pending))
		for k := range ix.pending {
			set[k] = ix.keys[k].pending
		}
		ix.publish(set)
	}
	return true
}

// Admit runs Checks.Policy alone, on a record that did not go through
// Decode in this process (one from a start-up cache).
func (ix *Index) Admit(rec *Record) error {
	if p := ix.opts.Checks.Policy; p != nil {
		return p(rec)
	}
	return nil
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
	ix := &Index{opts: opts, served: map[string]*Record{}, names: map[string]string{}, addrs: map[netip.Addr]string{},
		keys: map[string]*keyState{}, pending: map[string]struct{}{}}
	empty, _ := NewSnapshot(nil)
	ix.snap.Store(empty)
	return ix
}

// Snapshot returns what is served (an atomic load).
func (ix *Index) Snapshot() *Snapshot { return ix.snap.Load() }

// Apply takes the changed keys' new versions, together with every version
// refused earlier, and publishes a new snapshot when what is served
// changed (it reports whether it tried: whether there was a version to
// take). A version whose revision (and UID) is already served changes
// nothing. Versions are tried in Seq order; one refused only because of
// another change in the same call is retried until nothing more can be
// applied. Its cost is O(changes + versions refused for now), whatever
// the number of keys: the snapshot is derived from the last one.
//
// A record without a UID is given one as it is first served: its
// predecessor's, when the snapshot being replaced holds an instance of
// that name (an edit, or a move to another key), else a new one; the
// records of the first Apply all get the empty UID, so that a restarted
// server gives them the same one (IMDSv2 tokens survive it).
func (ix *Index) Apply(changes []Change) bool {
	defer func() { ix.loaded = true }()
	if len(ix.keys) == 0 && len(changes) > 64 {
		// A first load: no rehashing on the way to 100,000.
		ix.keys = make(map[string]*keyState, len(changes))
		ix.served = make(map[string]*Record, len(changes))
		ix.names = make(map[string]string, len(changes))
		ix.addrs = make(map[netip.Addr]string, len(changes))
	}
	set := make(map[string]*Record, len(changes)+len(ix.pending))
	for _, c := range changes {
		st := ix.keys[c.Key]
		if c.Record == nil && c.Err == nil {
			if st != nil {
				delete(ix.keys, c.Key)
				delete(ix.pending, c.Key)
				set[c.Key] = nil
			}
			continue
		}
		if st == nil {
			st = &keyState{}
			ix.keys[c.Key] = st
		}
		st.seq, st.pending, st.refused = c.Seq, nil, nil
		delete(ix.pending, c.Key)
		if c.Err != nil {
			attrs := append([]any{ix.opts.KeyAttr, c.Key}, c.Attrs...)
			attrs = append(attrs, problemAttrs(c.Err)...)
			ix.opts.Logger.Error(ix.opts.Invalid, append(attrs, "serving", ix.serving(c.Key))...)
			continue
		}
		if old := ix.served[c.Key]; old == nil || old.Revision != c.Record.Revision || c.Record.UID != "" && c.Record.UID != old.UID {
			st.pending = c.Record
			ix.pending[c.Key] = struct{}{}
		}
	}
	for k := range ix.pending {
		set[k] = ix.keys[k].pending
	}
	if len(set) == 0 {
		return false
	}
	ix.publish(set)
	return true
}

// publish resolves set (keys → their new record, nil for a key that is
// gone) against what is served, logs the versions refused, and publishes
// the snapshot derived from the last one.
func (ix *Index) publish(set map[string]*Record) {
	order := slices.Collect(maps.Keys(set))
	slices.SortFunc(order, func(a, b string) int { return cmp.Or(cmp.Compare(ix.seq(a), ix.seq(b)), strings.Compare(a, b)) })
	before := make(map[string]*Record, len(set))
	for k := range set {
		before[k] = ix.served[k]
	}
	refused := ix.resolve(set, order, nil)
	for k := range ix.pending {
		st := ix.keys[k]
		switch err := refused[k]; {
		case err == nil:
			st.pending, st.refused = nil, nil
			delete(ix.pending, k)
		case st.refused == nil || err.Error() != st.refused.Error():
			st.refused = err
			ix.opts.Logger.Error(ix.opts.Refused, ix.opts.KeyAttr, k, "instance", st.pending.Name, "problem", err.Error(), "serving", ix.serving(k))
		}
	}
	ix.pendingPeak = max(ix.pendingPeak, len(set))
	if len(ix.pending)*8 < ix.pendingPeak {
		small := make(map[string]struct{}, len(ix.pending))
		for k := range ix.pending {
			small[k] = struct{}{}
		}
		ix.pending, ix.pendingPeak = small, len(small)
	}
	ix.giveUIDs(set)
	var gone, added []*Record
	for _, k := range order {
		if old, cur := before[k], ix.served[k]; old != cur {
			if old != nil {
				gone = append(gone, old)
			}
			if cur != nil {
				added = append(added, cur)
			}
		}
	}
	if len(gone)+len(added) > 0 {
		ix.snap.Store(ix.snap.Load().derive(gone, added))
	}
	if ix.opts.Unaddressed != nil && ix.loaded {
		var names []string
		for _, r := range added {
			if r.unaddressed() {
				names = append(names, r.Name)
			}
		}
		if len(names) > 0 {
			slices.Sort(names)
			ix.opts.Unaddressed(names)
		}
	}
}

// giveUIDs gives the records set newly serves a UID, when they have none
// (see Apply).
func (ix *Index) giveUIDs(set map[string]*Record) {
	first := !ix.applied
	ix.applied = true
	prev := ix.snap.Load()
	for k, r := range set {
		if r == nil || ix.served[k] != r || r.UID != "" {
			continue
		}
		if old, ok := prev.byName.get(r.Name); ok { // not ByName: no check runs under the store's lock
			r.UID = old.UID
		} else if !first {
			ix.uids++
			r.UID = "i" + strconv.FormatUint(ix.uids, 10)
		}
	}
}

func (ix *Index) seq(key string) int64 {
	if st := ix.keys[key]; st != nil {
		return st.seq
	}
	return 0
}

// serving says, in a log line, what a key whose new version was not taken
// serves meanwhile. Not its revision: that hashes the values the spec's
// references read (a Kubernetes Secret's among them), and whoever reads
// the server's logs may not read the Secret, but could test guesses of a
// short one against the hash.
func (ix *Index) serving(key string) string {
	if ix.served[key] != nil {
		return "the last good version"
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
	k, ok := ix.names[name]
	return k, ok
}

// Each calls f for every key and the record it serves, in no order.
func (ix *Index) Each(f func(key string, rec *Record)) {
	for k, r := range ix.served {
		f(k, r)
	}
}

// EachPending calls f for every key whose latest version is refused for
// now (see Pending), with that version, in no order.
func (ix *Index) EachPending(f func(key string, rec *Record)) {
	for k := range ix.pending {
		f(k, ix.keys[k].pending)
	}
}

// Check reports whether rec would be served from key, with the keys in
// gone removed first (a Put that moves an instance to another key), or
// the conflict it would be refused for. Stores call it before they write,
// so that a write that would be refused on load is refused up front. It
// changes nothing (what it tries is undone), in O(1) of the number of
// keys.
func (ix *Index) Check(key string, rec *Record, gone ...string) error {
	set := map[string]*Record{key: rec}
	order := make([]string, 0, len(gone)+1)
	for _, g := range gone {
		if g != "" && g != key {
			set[g] = nil
			order = append(order, g)
		}
	}
	var undo []func()
	refused := ix.resolve(set, append(order, key), &undo)
	for i := len(undo) - 1; i >= 0; i-- {
		undo[i]()
	}
	return refused[key]
}

// resolve applies the conflict rule to ix.served, ix.names and ix.addrs in
// place. changes maps keys (a file name, an etcd key) to their new
// record, or to nil for a key that is gone. Records that are being served
// keep their names and addresses: a changed record that would take a
// name or an address from another key is refused (the newcomer loses)
// and that key keeps serving its previous record, if it had one. Changes
// are tried in the order of keys; a change that was refused only because
// of another change in the same batch is retried until nothing more can
// be applied. It returns the refused keys with why; with undo, it appends
// there what reverts each of its steps.
func (ix *Index) resolve(changes map[string]*Record, keys []string, undo *[]func()) map[string]error {
	ed := edits{ix: ix, undo: undo}
	for _, k := range keys {
		if c, changed := changes[k]; changed && c == nil {
			if old := ix.served[k]; old != nil {
				ed.unclaim(k, old)
				ed.setServed(k, nil)
			}
		}
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
			old := ix.served[k]
			if old != nil {
				ed.unclaim(k, old)
			}
			if err := ix.conflict(k, nr); err != nil {
				if old != nil {
					ed.claim(k, old)
				}
				refused[k] = err
				rest = append(rest, k)
				continue
			}
			delete(refused, k)
			ed.setServed(k, nr)
			ed.claim(k, nr)
			progress = true
		}
		pending = rest
	}
	if len(pending) > 1 && ix.fitTogether(changes, pending, ed) {
		clear(refused)
	}
	return refused
}

// conflict is why key k may not serve nr: a name or an address another
// key holds; nil if it may.
func (ix *Index) conflict(k string, nr *Record) error {
	if o, taken := ix.names[nr.Name]; taken && o != k {
		return fmt.Errorf("%w: instance %q is already defined by %s", ErrConflict, nr.Name, o)
	}
	for _, a := range nr.Addresses {
		if o, taken := ix.addrs[a]; taken && o != k {
			return fmt.Errorf("%w: %s is claimed by %s (instance %q)", ErrAddressConflict, a, o, ix.served[o].Name)
		}
	}
	return nil
}

// edits are resolve's steps on an Index's served records and claims; with
// undo set, each step appends there what reverts it.
type edits struct {
	ix   *Index
	undo *[]func()
}

// setServed makes r the record served for key k (nil: none).
func (ed edits) setServed(k string, r *Record) {
	ix := ed.ix
	if ed.undo != nil {
		old, had := ix.served[k]
		*ed.undo = append(*ed.undo, func() {
			if had {
				ix.served[k] = old
			} else {
				delete(ix.served, k)
			}
		})
	}
	if r == nil {
		delete(ix.served, k)
	} else {
		ix.served[k] = r
	}
}

// claim gives r's name and addresses to key k.
func (ed edits) claim(k string, r *Record) {
	ix := ed.ix
	if ed.undo != nil {
		*ed.undo = append(*ed.undo, func() { release(ix.names, ix.addrs, r) })
	}
	hold(ix.names, ix.addrs, k, r)
}

// unclaim releases r's name and addresses, which key k holds.
func (ed edits) unclaim(k string, r *Record) {
	ix := ed.ix
	if ed.undo != nil {
		*ed.undo = append(*ed.undo, func() { hold(ix.names, ix.addrs, k, r) })
	}
	release(ix.names, ix.addrs, r)
}

// fitTogether takes the changes of keys all at once when each was refused
// only because another of them still holds its previous version (two
// records exchanging addresses: neither fits first): with every previous
// version of keys released, the new ones claim no name or address twice
// and none that another key holds. Otherwise it changes nothing. A store
// that resolves its claims itself (kubestore) hands the Index such
// batches; with it, what is served never depends on the order of keys.
func (ix *Index) fitTogether(changes map[string]*Record, keys []string, ed edits) bool {
	names := make(map[string]bool, len(keys))
	addrs := map[netip.Addr]bool{}
	inBatch := make(map[string]bool, len(keys))
	for _, k := range keys {
		inBatch[k] = true
	}
	mine := func(holder string) bool { return inBatch[holder] }
	for _, k := range keys {
		nr := changes[k]
		if o, taken := ix.names[nr.Name]; names[nr.Name] || taken && !mine(o) {
			return false
		}
		names[nr.Name] = true
		for _, a := range nr.Addresses {
			if o, taken := ix.addrs[a]; addrs[a] || taken && !mine(o) {
				return false
			}
			addrs[a] = true
		}
	}
	for _, k := range keys {
		if old := ix.served[k]; old != nil {
			ed.unclaim(k, old)
		}
	}
	for _, k := range keys {
		ed.setServed(k, changes[k])
		ed.claim(k, changes[k])
	}
	return true
}

// hold gives r's name and addresses to key k in the claims.
func hold(names map[string]string, addrs map[netip.Addr]string, k string, r *Record) {
	names[r.Name] = k
	for _, a := range r.Addresses {
		addrs[a] = k
	}
}

// release removes r's name and addresses from the claims.
func release(names map[string]string, addrs map[netip.Addr]string, r *Record) {
	delete(names, r.Name)
	for _, a := range r.Addresses {
		delete(addrs, a)
	}
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
