package mdserver

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/delivery"
	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/network"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// LabelUserData, set to "ignition" on an instance, makes every dialect's
// user data (EC2 user-data, OpenStack user_data, NoCloud user-data) the
// instance's Ignition config. Instances with spec.ignition.config or
// spec.ignition.butane are Ignition instances without it; "cloud-init"
// forces cloud-init user data.
const LabelUserData = "vminit.dev/user-data"

// isIgnition reports whether the instance's user data is Ignition.
func isIgnition(inst *spec.Instance) bool {
	switch inst.Metadata.Labels[LabelUserData] {
	case "ignition":
		return true
	case "cloud-init":
		return false
	}
	return inst.Spec.Ignition.Config != "" || inst.Spec.Ignition.Butane != ""
}

// entry is the rendered data of one record revision, computed on first use.
type entry struct {
	rev string

	once sync.Once
	p    *payloads
	err  error

	ignOnce sync.Once
	ign     []byte
	ignErr  error

	size    int64
	counted atomic.Bool // added to the cache metrics
}

// payloads are one record's rendered files. Trees map paths relative to a
// dialect's version directory to bodies; directory listings end in "/".
type payloads struct {
	ignition  bool   // user data is the Ignition config
	userData  []byte // cloud-init user data (unused for Ignition instances)
	ec2       [ec2Levels]map[string][]byte
	openstack map[string][]byte // meta_data.json, network_data.json, vendor_data.json
	nocloud   map[string][]byte // meta-data, vendor-data, network-config
}

func (h *handler) entry(rec *Record) *entry {
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

func (h *handler) uncount(e *entry) {
	if h.metrics != nil && e.counted.CompareAndSwap(true, false) {
		h.metrics.cacheEntries.Add(-1)
		h.metrics.cacheBytes.Add(-e.size)
	}
}

// payloads renders (once) and returns the record's payloads.
func (h *handler) payloads(rec *Record) (*entry, *payloads, error) {
	e := h.entry(rec)
	e.once.Do(func() {
		e.p, e.err = render(rec)
		if e.err == nil {
			e.size = e.p.bytes()
			if h.metrics != nil {
				e.counted.Store(true)
				h.metrics.cacheEntries.Add(1)
				h.metrics.cacheBytes.Add(e.size)
			}
		}
	})
	return e, e.p, e.err
}

// bytes is the size of the payloads' paths and bodies, each counted once
// however many trees share it (the EC2 levels share most of theirs).
func (p *payloads) bytes() int64 {
	n := int64(len(p.userData))
	seen := map[uintptr]bool{}
	once := func(ptr uintptr, size int) {
		if size > 0 && !seen[ptr] {
			seen[ptr] = true
			n += int64(size)
		}
	}
	for _, m := range append(p.ec2[:], p.openstack, p.nocloud) {
		for k, v := range m {
			once(uintptr(unsafe.Pointer(unsafe.StringData(k))), len(k))
			once(uintptr(unsafe.Pointer(unsafe.SliceData(v))), len(v))
		}
	}
	return n
}

func render(rec *Record) (*payloads, error) {
	inst := rec.Instance
	p := &payloads{ignition: isIgnition(inst)}
	nc, err := seed.Build(inst, seed.NoCloud, seed.Options{})
	if err != nil {
		return nil, fmt.Errorf("rendering %s for NoCloud: %w", rec.Name, err)
	}
	p.userData, _ = nc.Lookup("user-data")
	p.nocloud = map[string][]byte{}
	for _, f := range nc.Files {
		if f.Path != "user-data" {
			p.nocloud[f.Path] = f.Data
		}
	}
	// The ConfigDrive files are rendered one by one rather than with a
	// second seed.Build, which would render (and check) the user data
	// again: that was a third of a first fetch.
	osErr := func(err error) error { return fmt.Errorf("rendering %s for OpenStack: %w", rec.Name, err) }
	p.openstack = map[string][]byte{}
	md, err := cloudinit.ConfigDriveMetaData(inst)
	if err != nil {
		return nil, osErr(err)
	}
	p.openstack["meta_data.json"] = md
	if n := inst.Spec.Network; n != nil {
		nd, err := network.NetworkDataJSON(n)
		if err != nil {
			return nil, osErr(err)
		}
		if nd != nil {
			p.openstack["network_data.json"] = nd
		}
	}
	vd, err := cloudinit.ConfigDriveVendorData(inst)
	if err != nil {
		return nil, osErr(err)
	}
	if vd != nil {
		p.openstack["vendor_data.json"] = vd
	}
	p.ec2 = ec2Trees(rec)
	return p, nil
}

// ignitionConfig renders (once) the record's Ignition config.
func (h *handler) renderIgnition(rec *Record) ([]byte, error) {
	e := h.entry(rec)
	e.ignOnce.Do(func() {
		res, err := ignition.Render(rec.Instance, ignition.Options{Variant: h.opts.IgnitionVariant, AllowPartial: true})
		if err != nil {
			e.ignErr = err
			return
		}
		for _, w := range res.Warnings {
			h.log.Warn("ignition rendering", "instance", rec.Name, "warning", w)
		}
		e.ign = res.Config
		if h.metrics != nil {
			h.metrics.cacheBytes.Add(int64(len(e.ign)))
		}
		e.size += int64(len(e.ign))
	})
	return e.ign, e.ignErr
}

// userData returns the user data every dialect serves: cloud-init's, or
// for an Ignition instance the Ignition config, replaced by a pointer
// config to this server's /ignition/config when it exceeds the transport's
// budget (as it would on the real cloud).
func (h *handler) userData(r *http.Request, rec *Record, transport string) ([]byte, string, error) {
	_, p, err := h.payloads(rec)
	if err != nil {
		return nil, "", err
	}
	if !p.ignition {
		return p.userData, textPlain, nil
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
func (h *handler) sweep(s *Snapshot) {
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
