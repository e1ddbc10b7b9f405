package mdserver

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"unsafe"

	"github.com/vminit/vminit/delivery"
	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// isIgnition reports whether the instance's user data is Ignition: its
// spec.agent, which spec.Default fills in.
func isIgnition(inst *spec.Instance) bool {
	return inst.Spec.Agent == spec.AgentIgnition
}

// entry is the rendered data of one record revision. Each dialect's files
// are rendered on first use, separately: an EC2 guest never pays for the
// NoCloud or ConfigDrive metadata (a third of rendering them all), and a
// part that fails to render fails only the requests that need it.
type entry struct {
	rev string

	userData  part[[]byte]                       // cloud-init user data; every dialect serves it
	ec2       part[[ec2Levels]map[string][]byte] // paths relative to a version directory; listings end in "/"
	openstack part[map[string][]byte]            // meta_data.json, network_data.json, vendor_data.json
	nocloud   part[map[string][]byte]            // meta-data, vendor-data, network-config
	ignition  part[[]byte]                       // the Ignition config

	mu      sync.Mutex // guards the metrics accounting below
	size    int64      // bytes added to the cache metrics
	counted bool       // counted in vminit_mdserver_cache_entries
	dropped bool       // out of the cache: rendering it no longer counts
}

// part is one lazily rendered piece of an entry.
type part[T any] struct {
	once sync.Once
	v    T
	err  error
}

// getPart renders the part on first use; size (when the render succeeded) is
// what it adds to the cache metrics.
func getPart[T any](h *Handler, e *entry, p *part[T], render func() (T, error), size func(T) int64) (T, error) {
	p.once.Do(func() {
		p.v, p.err = render()
		if p.err == nil {
			h.account(e, size(p.v))
		}
	})
	return p.v, p.err
}

func (h *Handler) entry(rec *registry.Record) *entry {
	v, ok := h.cache.Load(rec.Name)
	if ok {
		if e := v.(*entry); e.rev == rec.Revision {
			return e
		}
	}
	e := &entry{rev: rec.Revision}
	if ok {
		if h.cache.CompareAndSwap(rec.Name, v, e) {
			h.uncount(v.(*entry))
		} else if v2, ok := h.cache.Load(rec.Name); ok && v2.(*entry).rev == rec.Revision {
			return v2.(*entry)
		}
		return e
	}
	if v, loaded := h.cache.LoadOrStore(rec.Name, e); loaded {
		return v.(*entry)
	}
	return e
}

// account adds n rendered bytes of e to the cache metrics.
func (h *Handler) account(e *entry, n int64) {
	if h.metrics == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dropped {
		return
	}
	if !e.counted {
		e.counted = true
		h.metrics.cacheEntries.Add(1)
	}
	e.size += n
	h.metrics.cacheBytes.Add(n)
}

// uncount takes e, dropped from the cache, out of the metrics.
func (h *Handler) uncount(e *entry) {
	if h.metrics == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dropped = true
	if e.counted {
		e.counted = false
		h.metrics.cacheEntries.Add(-1)
		h.metrics.cacheBytes.Add(-e.size)
	}
}

// treeBytes is the size of the trees' paths and bodies, each counted once
// however many trees share it (the EC2 levels share most of theirs).
func treeBytes(trees ...map[string][]byte) int64 {
	var n int64
	seen := map[uintptr]bool{}
	once := func(ptr uintptr, size int) {
		if size > 0 && !seen[ptr] {
			seen[ptr] = true
			n += int64(size)
		}
	}
	for _, m := range trees {
		for k, v := range m {
			once(uintptr(unsafe.Pointer(unsafe.StringData(k))), len(k))
			once(uintptr(unsafe.Pointer(unsafe.SliceData(v))), len(v))
		}
	}
	return n
}

func bytesLen(b []byte) int64 { return int64(len(b)) }

// cloudUserData renders (once) the record's cloud-init user data.
func (h *Handler) cloudUserData(rec *registry.Record) ([]byte, error) {
	e := h.entry(rec)
	return getPart(h, e, &e.userData, func() ([]byte, error) {
		ud, err := seed.UserData(rec.Instance)
		if err != nil {
			return nil, fmt.Errorf("rendering %s: %w", rec.Name, err)
		}
		return ud, nil
	}, bytesLen)
}

// ec2Tree renders (once) the record's EC2 meta-data trees, one per level.
func (h *Handler) ec2Tree(rec *registry.Record) [ec2Levels]map[string][]byte {
	e := h.entry(rec)
	t, _ := getPart(h, e, &e.ec2, func() ([ec2Levels]map[string][]byte, error) { return ec2Trees(rec), nil },
		func(t [ec2Levels]map[string][]byte) int64 { return treeBytes(t[:]...) })
	return t
}

// openstackFiles renders (once) the record's ConfigDrive metadata files,
// by name.
func (h *Handler) openstackFiles(rec *registry.Record) (map[string][]byte, error) {
	e := h.entry(rec)
	return h.metadataFiles(rec, e, &e.openstack, seed.ConfigDrive, "openstack/latest/")
}

// nocloudFiles renders (once) the record's NoCloud meta-data, vendor-data
// and network-config (version 2).
func (h *Handler) nocloudFiles(rec *registry.Record) (map[string][]byte, error) {
	e := h.entry(rec)
	return h.metadataFiles(rec, e, &e.nocloud, seed.NoCloud, "")
}

// metadataFiles renders (once, into e's part p) the files seed.Metadata
// gives ds, named by their path without dir.
func (h *Handler) metadataFiles(rec *registry.Record, e *entry, p *part[map[string][]byte], ds seed.Datasource, dir string) (map[string][]byte, error) {
	return getPart(h, e, p, func() (map[string][]byte, error) {
		files, err := seed.Metadata(rec.Instance, ds, seed.Options{})
		if err != nil {
			return nil, fmt.Errorf("rendering %s for %s: %w", rec.Name, ds, err)
		}
		m := make(map[string][]byte, len(files))
		for _, f := range files {
			m[strings.TrimPrefix(f.Path, dir)] = f.Data
		}
		return m, nil
	}, func(m map[string][]byte) int64 { return treeBytes(m) })
}

// renderIgnition renders (once) the record's Ignition config.
func (h *Handler) renderIgnition(rec *registry.Record) ([]byte, error) {
	e := h.entry(rec)
	return getPart(h, e, &e.ignition, func() ([]byte, error) {
		res, err := ignition.Render(rec.Instance, ignition.Options{Variant: h.opts.IgnitionVariant, AllowPartial: true})
		if err != nil {
			return nil, err
		}
		for _, w := range res.Warnings {
			h.log.Warn("ignition rendering", "instance", rec.Name, "warning", w)
		}
		return res.Config, nil
	}, bytesLen)
}

// userData returns the user data every dialect serves: cloud-init's, or
// for an Ignition instance the Ignition config, replaced by a pointer
// config to this server's /ignition/config when it exceeds the transport's
// budget (as it would on the real cloud).
func (h *Handler) userData(r *http.Request, rec *registry.Record, transport string) ([]byte, string, error) {
	if !isIgnition(rec.Instance) {
		ud, err := h.cloudUserData(rec)
		return ud, textPlain, err
	}
	cfg, err := h.renderIgnition(rec)
	if err != nil {
		return nil, "", err
	}
	if transport == "" {
		return cfg, ignitionType, nil
	}
	t, err := delivery.LookupTransport(transport)
	if err != nil {
		return nil, "", err
	}
	out, _, err := delivery.Fit(cfg, t, configURL(r), nil)
	return out, ignitionType, err
}

// sweep drops cached payloads of records that are gone or changed.
func (h *Handler) sweep(s *registry.Snapshot) {
	h.cache.Range(func(k, v any) bool {
		if rec, ok := s.ByName(k.(string)); !ok || rec.Revision != v.(*entry).rev {
			if h.cache.CompareAndDelete(k, v) {
				h.uncount(v.(*entry))
			}
		}
		return true
	})
	h.limits.Range(func(k, _ any) bool {
		if _, ok := s.ByName(k.(string)); !ok {
			h.limits.Delete(k)
		}
		return true
	})
}
