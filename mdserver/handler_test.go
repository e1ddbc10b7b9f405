package mdserver

import (
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/mdserver/registry"
)

func twoInstances(t *testing.T, extraA string) *registry.StaticStore {
	return testStore(t,
		testRecord(t, instanceDoc("vm-a", []string{"127.0.0.2"}, extraA), "1"),
		testRecord(t, instanceDoc("vm-bb", []string{"127.0.0.3"}, ""), "1"))
}

// crawl walks an EC2 tree as cloud-init's MetadataMaterializer does and
// returns leaf path → body; every listed name must be fetchable.
func crawl(t *testing.T, c *clientT, base string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(dir string)
	walk = func(dir string) {
		r := c.get(base + dir)
		if r.status != 200 || r.body == "" {
			t.Fatalf("listing %s: %d %q", dir, r.status, r.body)
		}
		for _, name := range strings.Split(r.body, "\n") {
			switch {
			case strings.HasSuffix(name, "/"):
				walk(dir + name)
			case strings.Contains(name, "="):
				idx, _, _ := strings.Cut(name, "=")
				lr := c.get(base + dir + idx + "/")
				if lr.status != 200 || lr.body != "openssh-key" {
					t.Errorf("%s%s/: %d %q", dir, idx, lr.status, lr.body)
				}
				k := c.get(base + dir + idx + "/openssh-key")
				if k.status != 200 {
					t.Errorf("%s%s/openssh-key: %d", dir, idx, k.status)
				}
				out[dir+idx+"/openssh-key"] = k.body
			default:
				lr := c.get(base + dir + name)
				if lr.status != 200 || lr.body == "" {
					t.Errorf("listed %s%s: %d %q", dir, name, lr.status, lr.body)
				}
				if strings.HasSuffix(lr.body, "\n") || (strings.Contains(lr.body, "\n") && !strings.HasPrefix(lr.body, "{")) && !strings.HasSuffix(name, "s") {
					t.Errorf("%s%s looks like a directory listing: %q", dir, name, lr.body)
				}
				out[dir+name] = lr.body
			}
		}
	}
	walk("meta-data/")
	return out
}

type clientT struct {
	t   *testing.T
	src string
	hdr map[string]string
}

func (c *clientT) get(url string) resp {
	return do(c.t, clientFrom(c.src), "GET", url, c.hdr, "")
}

func TestEC2Tree(t *testing.T) {
	srv, _ := serve(t, NewHandler(twoInstances(t, ""), Options{AllowLoopbackInstances: true, Logger: quietLogger()}))
	c := &clientT{t: t, src: "127.0.0.2"}
	if r := c.get(srv.URL + "/"); r.status != 200 || !strings.Contains(r.body, "2009-04-04\n") || !strings.HasSuffix(r.body, "latest") {
		t.Errorf("version list: %d %q", r.status, r.body)
	}
	for _, v := range cloudinit.EC2Versions() {
		base := srv.URL + "/" + v + "/"
		leaves := crawl(t, c, base)
		if leaves["meta-data/instance-id"] == "" || leaves["meta-data/local-hostname"] != "vm-a.example.com" {
			t.Errorf("%s: %v", v, leaves)
		}
		if leaves["meta-data/public-keys/0/openssh-key"] != testKey {
			t.Errorf("%s: key %q", v, leaves["meta-data/public-keys/0/openssh-key"])
		}
		if leaves["meta-data/local-ipv4"] != "192.0.2.14" || leaves["meta-data/mac"] != "52:54:00:12:34:04" {
			t.Errorf("%s: ipv4 %q mac %q", v, leaves["meta-data/local-ipv4"], leaves["meta-data/mac"])
		}
		_, hasRegion := leaves["meta-data/placement/region"]
		_, hasNet := leaves["meta-data/network/interfaces/macs/52:54:00:12:34:04/device-number"]
		if hasRegion != (cloudinit.EC2Level(v) >= 2) || hasNet != (cloudinit.EC2Level(v) >= 1) {
			t.Errorf("%s: region %v network %v", v, hasRegion, hasNet)
		}
		if r := c.get(base + "dynamic/instance-identity"); r.status != 200 || r.body != "document" {
			t.Errorf("%s: instance-identity without slash: %d %q", v, r.status, r.body)
		}
		var doc map[string]any
		r := c.get(base + "dynamic/instance-identity/document")
		if err := json.Unmarshal([]byte(r.body), &doc); err != nil || doc["instanceId"] != leaves["meta-data/instance-id"] {
			t.Errorf("%s: identity document %v %v", v, doc, err)
		}
		if r := c.get(base + "user-data"); r.status != 200 || !strings.HasPrefix(r.body, "#cloud-config") {
			t.Errorf("%s: user-data %d %q", v, r.status, r.body)
		}
		if r := c.get(base); r.body != "dynamic\nmeta-data\nuser-data" {
			t.Errorf("%s: version dir %q", v, r.body)
		}
	}
	for _, p := range []string{"/2009-04-04/meta-data/nope", "/2011-01-01/meta-data/", "/2009-04-04/user-data/", "/1.0/"} {
		if r := c.get(srv.URL + p); r.status != 404 || r.body != "" {
			t.Errorf("%s: %d %q, want an empty 404", p, r.status, r.body)
		}
	}
}

func TestIsolation(t *testing.T) {
	key := []byte("proxy-secret-0123456789")
	now := time.Unix(1_700_000_000, 0)
	store := twoInstances(t, "")
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger(), HMACKey: key, Now: func() time.Time { return now },
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.5/32")}})
	srv, _ := serve(t, h)
	idOf := func(name string) string { r, _ := store.Snapshot().ByName(name); return r.Instance().Spec.InstanceID }
	a, b := idOf("vm-a"), idOf("vm-bb")
	url := srv.URL + "/latest/meta-data/instance-id"
	check := func(what, src string, hdr map[string]string, wantStatus int, wantBody string) {
		t.Helper()
		r := (&clientT{t: t, src: src, hdr: hdr}).get(url)
		if r.status != wantStatus || r.body != wantBody {
			t.Errorf("%s: %d %q, want %d %q", what, r.status, r.body, wantStatus, wantBody)
		}
	}
	check("A", "127.0.0.2", nil, 200, a)
	check("B", "127.0.0.3", nil, 200, b)
	// A refused request is told why in one line, a line that
	// names no instance: not which exist, nor whether a name does.
	unknown := refusedNoOwner.message(netip.MustParseAddr("127.0.0.4"))
	check("unknown address", "127.0.0.4", nil, 404, unknown)
	check("A naming B by X-Forwarded-For", "127.0.0.2", map[string]string{"X-Forwarded-For": "127.0.0.3"}, 200, a)
	check("A with a valid signature for B (untrusted source)", "127.0.0.2", map[string]string{HeaderInstance: SignInstance(key, "vm-bb", "", now.Add(time.Minute))}, 200, a)
	check("unknown address with a signature", "127.0.0.4", map[string]string{HeaderInstance: SignInstance(key, "vm-bb", "", now.Add(time.Minute))}, 404, unknown)
	check("trusted proxy, signed B", "127.0.0.5", map[string]string{HeaderInstance: SignInstance(key, "vm-bb", "", now.Add(time.Minute))}, 200, b)
	check("trusted proxy, unsigned XFF A while signed headers are required", "127.0.0.5", map[string]string{"X-Forwarded-For": "127.0.0.2"}, 403, refusedUnsigned.message(netip.Addr{}))
	check("trusted proxy, forged", "127.0.0.5", map[string]string{HeaderInstance: SignInstance([]byte("wrong"), "vm-bb", "", now.Add(time.Minute))}, 403, refusedSignature.message(netip.Addr{}))
	forged := SignInstance(key, "vm-bb", "", now.Add(time.Minute))
	check("trusted proxy, name swapped", "127.0.0.5", map[string]string{HeaderInstance: strings.Replace(forged, ";vm-bb;", ";vm-a;", 1)}, 403, refusedSignature.message(netip.Addr{}))
	check("trusted proxy, expired", "127.0.0.5", map[string]string{HeaderInstance: SignInstance(key, "vm-bb", "", now.Add(-InstanceHeaderSkew-time.Second))}, 403, refusedSignature.message(netip.Addr{}))
	check("trusted proxy, no header", "127.0.0.5", nil, 404, refusedUnnamed.message(netip.Addr{}))
	check("trusted proxy, signed for a name not served", "127.0.0.5", map[string]string{HeaderInstance: SignInstance(key, "vm-gone", "", now.Add(time.Minute))}, 404, refusedName.message(netip.Addr{}))
	for why := refusedNoOwner; why <= refusedForwarded; why++ {
		if m := why.message(netip.MustParseAddr("192.0.2.9")); strings.Count(m, "\n") != 1 || !strings.HasSuffix(m, "\n") || strings.Contains(m, "vm-") {
			t.Errorf("refusal %d: %q: want one line that names no instance", why, m)
		}
	}
	for _, p := range []string{"/openstack/latest/meta_data.json", "/nocloud/meta-data", "/ignition/config", "/latest/user-data"} {
		ra := (&clientT{t: t, src: "127.0.0.2"}).get(srv.URL + p)
		rb := (&clientT{t: t, src: "127.0.0.3"}).get(srv.URL + p)
		if ra.status != 200 || rb.status != 200 || strings.Contains(ra.body, "vm-bb") || strings.Contains(rb.body, "vm-a") {
			t.Errorf("%s: A %d, B %d, or one sees the other's name", p, ra.status, rb.status)
		}
		if r := (&clientT{t: t, src: "127.0.0.4"}).get(srv.URL + p); r.status != 404 || r.body != unknown {
			t.Errorf("%s from an unknown address: %d %q", p, r.status, r.body)
		}
	}
}

func TestIMDSv2(t *testing.T) {
	store := twoInstances(t, "    imdsv2: required\n    tokenHopLimit: 3\n")
	srv, conns := serve(t, NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger()}))
	ca, cb := clientFrom("127.0.0.2"), clientFrom("127.0.0.3")
	tokURL := srv.URL + "/latest/api/token"
	keep := clientFrom("127.0.0.2")
	keep.Transport.(*http.Transport).DisableKeepAlives = false
	r := do(t, keep, "PUT", tokURL, map[string]string{HeaderTokenTTL: "21600"}, "")
	if r.status != 200 || len(r.body) < 20 || r.header.Get(HeaderTokenTTL) != "21600" {
		t.Fatalf("token: %d %q %v", r.status, r.body, r.header)
	}
	tokA := r.body
	conns.mu.Lock()
	last := conns.conns[len(conns.conns)-1]
	conns.mu.Unlock()
	if ttl, err := ConnHopLimit(last); err != nil || ttl != 3 {
		t.Errorf("IP_TTL on the token connection = %d, %v; want 3", ttl, err)
	}
	for _, bad := range []string{"", "0", "21601", "x", "-5"} {
		if r := do(t, ca, "PUT", tokURL, map[string]string{HeaderTokenTTL: bad}, ""); r.status != 400 {
			t.Errorf("TTL %q: %d", bad, r.status)
		}
	}
	if r := do(t, ca, "PUT", tokURL, map[string]string{HeaderTokenTTL: "60", "X-Forwarded-For": "10.0.0.1"}, ""); r.status != 403 {
		t.Errorf("PUT with X-Forwarded-For: %d", r.status)
	}
	url := srv.URL + "/latest/meta-data/instance-id"
	if r := get(t, ca, url); r.status != 401 {
		t.Errorf("required, no token: %d", r.status)
	}
	if r := do(t, ca, "GET", url, map[string]string{HeaderToken: tokA}, ""); r.status != 200 {
		t.Errorf("required, token: %d", r.status)
	}
	if r := do(t, cb, "GET", url, map[string]string{HeaderToken: tokA}, ""); r.status != 401 {
		t.Errorf("A's token used by B: %d", r.status)
	}
	if r := get(t, cb, url); r.status != 200 {
		t.Errorf("optional (B), no token: %d", r.status)
	}
	if r := do(t, cb, "GET", url, map[string]string{HeaderToken: "garbage"}, ""); r.status != 401 {
		t.Errorf("optional, bad token: %d", r.status)
	}
	// Expiry.
	now := time.Unix(1_700_000_000, 0)
	clock := &now
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger(), Now: func() time.Time { return *clock }})
	srv2, _ := serve(t, h)
	tok := do(t, ca, "PUT", srv2.URL+"/latest/api/token", map[string]string{HeaderTokenTTL: "2"}, "").body
	*clock = now.Add(3 * time.Second)
	if r := do(t, ca, "GET", srv2.URL+"/latest/meta-data/instance-id", map[string]string{HeaderToken: tok}, ""); r.status != 401 {
		t.Errorf("expired token: %d", r.status)
	}
}

func TestHopLimitNeedsConn(t *testing.T) {
	h := NewHandler(twoInstances(t, ""), Options{AllowLoopbackInstances: true, Logger: quietLogger()})
	srv, _ := serve(t, h)
	srv.Config.ConnContext = nil // too late to matter for this server; use a plain one
	plain := newPlainServer(t, h)
	if r := do(t, clientFrom("127.0.0.2"), "PUT", plain+"/latest/api/token", map[string]string{HeaderTokenTTL: "60"}, ""); r.status != 500 {
		t.Errorf("token without access to the connection: %d, want 500 (fail closed)", r.status)
	}
}

func TestOpenStack(t *testing.T) {
	srv, _ := serve(t, NewHandler(twoInstances(t, ""), Options{AllowLoopbackInstances: true, Logger: quietLogger()}))
	c := clientFrom("127.0.0.2")
	if r := get(t, c, srv.URL+"/openstack"); r.status != 200 || !strings.HasSuffix(r.body, "2018-08-27\nlatest") {
		t.Errorf("/openstack: %d %q", r.status, r.body)
	}
	r := get(t, c, srv.URL+"/openstack/2018-08-27/")
	for _, name := range strings.Split(r.body, "\n") {
		if rr := get(t, c, srv.URL+"/openstack/2018-08-27/"+name); rr.status != 200 {
			t.Errorf("listed %s: %d", name, rr.status)
		}
	}
	if !strings.Contains(r.body, "network_data.json") || !strings.Contains(r.body, "vendor_data2.json") {
		t.Errorf("listing %q", r.body)
	}
	if r := get(t, c, srv.URL+"/openstack/2012-08-10/"); r.body != "meta_data.json\nuser_data" {
		t.Errorf("2012-08-10 listing %q", r.body)
	}
	var md map[string]any
	if err := json.Unmarshal([]byte(get(t, c, srv.URL+"/openstack/latest/meta_data.json").body), &md); err != nil || md["uuid"] == nil || md["hostname"] != "vm-a.example.com" {
		t.Errorf("meta_data.json: %v %v", md, err)
	}
	pw := srv.URL + "/openstack/latest/password"
	if r := get(t, c, pw); r.status != 200 || r.body != "" {
		t.Errorf("password before POST: %d %q", r.status, r.body)
	}
	if r := do(t, c, "POST", pw, nil, strings.Repeat("x", MaxPasswordBytes+1)); r.status != 413 {
		t.Errorf("%d-byte password: %d", MaxPasswordBytes+1, r.status)
	}
	if r := do(t, c, "POST", pw, nil, "secret"); r.status != 200 {
		t.Errorf("first POST: %d", r.status)
	}
	if r := do(t, c, "POST", pw, nil, "again"); r.status != 409 {
		t.Errorf("second POST: %d", r.status)
	}
	if r := get(t, c, pw); r.body != "secret" {
		t.Errorf("password: %q", r.body)
	}
	if r := get(t, clientFrom("127.0.0.3"), pw); r.body != "" {
		t.Errorf("B sees A's password: %q", r.body)
	}
}

func TestNoCloud(t *testing.T) {
	srv, _ := serve(t, NewHandler(twoInstances(t, ""), Options{AllowLoopbackInstances: true, Logger: quietLogger()}))
	c := clientFrom("127.0.0.2")
	if r := get(t, c, srv.URL+"/nocloud/meta-data"); r.status != 200 || !strings.Contains(r.body, "instance-id:") {
		t.Errorf("meta-data: %d %q", r.status, r.body)
	}
	if r := get(t, c, srv.URL+"/nocloud/user-data"); r.status != 200 || !strings.HasPrefix(r.body, "#cloud-config") {
		t.Errorf("user-data: %d %q", r.status, r.body)
	}
	if r := get(t, c, srv.URL+"/nocloud/vendor-data"); r.status != 200 || r.body != "" {
		t.Errorf("vendor-data: %d %q", r.status, r.body)
	}
	if r := get(t, c, srv.URL+"/nocloud/network-config"); r.status != 200 || !strings.Contains(r.body, "ethernets") {
		t.Errorf("network-config: %d %q", r.status, r.body)
	}
}

func TestIgnition(t *testing.T) {
	ign := "  ignition:\n    config: '{\"ignition\":{\"version\":\"3.3.0\"},\"storage\":{\"files\":[{\"path\":\"/etc/big\",\"contents\":{\"source\":\"data:," + strings.Repeat("a", 20000) + "\"}}]}}'\n"
	store := testStore(t, testRecord(t, instanceDoc("vm-a", []string{"127.0.0.2"}, "")+ign, "1"),
		testRecord(t, instanceDoc("vm-bb", []string{"127.0.0.3"}, ""), "1"))
	srv, _ := serve(t, NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger()}))
	c := clientFrom("127.0.0.2")
	cfg := get(t, c, srv.URL+"/ignition/config")
	if cfg.status != 200 || !json.Valid([]byte(cfg.body)) || !strings.Contains(cfg.body, `"version":"3.`) || cfg.header.Get("Content-Type") != ignitionType {
		t.Fatalf("config: %d %q", cfg.status, cfg.body[:min(200, len(cfg.body))])
	}
	sum := sha512.Sum512([]byte(cfg.body))
	wantHash := "sha512-" + hex.EncodeToString(sum[:])
	for _, p := range []string{"/ignition/pointer", "/ignition/pointer?transport=ec2", "/latest/user-data", "/openstack/latest/user_data"} {
		r := get(t, c, srv.URL+p)
		var ptr struct {
			Ignition struct {
				Config struct {
					Replace struct {
						Source       string
						Verification struct{ Hash string }
					}
				}
			}
		}
		if p == "/openstack/latest/user_data" {
			// 20 KB fits OpenStack's 64 KiB user_data: the config itself.
			if r.body != cfg.body {
				t.Errorf("%s: not the config", p)
			}
			continue
		}
		if err := json.Unmarshal([]byte(r.body), &ptr); err != nil || ptr.Ignition.Config.Replace.Source != srv.URL+"/ignition/config" || ptr.Ignition.Config.Replace.Verification.Hash != wantHash {
			t.Errorf("%s: %d %s %v", p, r.status, r.body, err)
		}
	}
	if r := get(t, c, srv.URL+"/ignition/pointer?transport=nope"); r.status != 400 {
		t.Errorf("unknown transport: %d", r.status)
	}
	if r := get(t, clientFrom("127.0.0.3"), srv.URL+"/latest/user-data"); !strings.HasPrefix(r.body, "#cloud-config") {
		t.Errorf("a cloud-init instance got %q", r.body)
	}
}

func TestRateLimitAndMetrics(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	m := NewMetrics()
	store := twoInstances(t, "")
	srv, _ := serve(t, NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger(), Rate: 1, Burst: 2, Metrics: m, Now: func() time.Time { return now }}))
	c := clientFrom("127.0.0.2")
	url := srv.URL + "/latest/meta-data/instance-id"
	get(t, c, url)
	get(t, c, url)
	r := get(t, c, url)
	if r.status != 429 || r.header.Get("Retry-After") != "1" {
		t.Errorf("third request: %d Retry-After %q", r.status, r.header.Get("Retry-After"))
	}
	if r := get(t, clientFrom("127.0.0.3"), url); r.status != 200 {
		t.Errorf("B limited by A's bucket: %d", r.status)
	}
	now = now.Add(time.Second)
	if r := get(t, c, url); r.status != 200 {
		t.Errorf("after a second: %d", r.status)
	}
	var sb strings.Builder
	m.WriteTo(&sb)
	for _, want := range []string{`vminit_mdserver_requests_total{dialect="ec2",code="200"} 4`, `vminit_mdserver_requests_total{dialect="ec2",code="429"} 1`,
		"vminit_mdserver_rate_limited_total 1", "vminit_mdserver_instances_loaded 2", "vminit_mdserver_cache_entries 2", `vminit_mdserver_request_duration_seconds_count{dialect="ec2"} 5`} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, sb.String())
		}
	}
	// A new revision is rendered afresh; the old entry is swept.
	recs := []*registry.Record{testRecord(t, strings.Replace(instanceDoc("vm-a", []string{"127.0.0.2"}, ""), "fqdn: vm-a.example.com", "fqdn: vm-a.example.org", 1), "2")}
	store.Replace(recs)
	now = now.Add(10 * time.Second)
	if r := get(t, c, srv.URL+"/latest/meta-data/hostname"); r.body != "vm-a.example.org" {
		t.Errorf("after a change: %q", r.body)
	}
	time.Sleep(50 * time.Millisecond)
	sb.Reset()
	m.WriteTo(&sb)
	if !strings.Contains(sb.String(), "vminit_mdserver_cache_entries 1\n") {
		t.Errorf("stale entries not swept:\n%s", sb.String())
	}
}

// TestLazyRendering: each dialect's files are rendered when first asked
// for, each adds its bytes to the cache metrics once, and a swept entry
// takes all of them out.
func TestLazyRendering(t *testing.T) {
	m := NewMetrics()
	store := twoInstances(t, "")
	srv, _ := serve(t, NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger(), Metrics: m}))
	c := clientFrom("127.0.0.2")
	cache := func() (entries, bytes int64) {
		var sb strings.Builder
		m.WriteTo(&sb)
		for _, l := range strings.Split(sb.String(), "\n") {
			fmt.Sscanf(l, "vminit_mdserver_cache_entries %d", &entries)
			fmt.Sscanf(l, "vminit_mdserver_cache_bytes %d", &bytes)
		}
		return entries, bytes
	}
	var last int64
	for _, p := range []string{"/latest/meta-data/instance-id", "/latest/user-data", "/openstack/latest/meta_data.json",
		"/nocloud/meta-data", "/ignition/config"} {
		if r := get(t, c, srv.URL+p); r.status != 200 {
			t.Fatalf("%s: %d", p, r.status)
		}
		entries, bytes := cache()
		if entries != 1 || bytes <= last {
			t.Errorf("after %s: %d entries, %d bytes (%d before): the part was not added", p, entries, bytes, last)
		}
		last = bytes
		get(t, c, srv.URL+p) // cached: nothing more
		if _, again := cache(); again != bytes {
			t.Errorf("%s fetched again: %d bytes, was %d", p, again, bytes)
		}
	}
	store.Replace(nil)
	get(t, c, srv.URL+"/latest/meta-data/instance-id") // the handler sweeps on a new snapshot
	deadline := time.Now().Add(5 * time.Second)
	for entries, bytes := cache(); entries != 0 || bytes != 0; entries, bytes = cache() {
		if time.Now().After(deadline) {
			t.Fatalf("after the instance left: %d entries, %d bytes", entries, bytes)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestIgnitionVariantFromSpec: each instance's Ignition config is rendered
// for its spec.ignition.variant (a Flatcar guest gets systemd-networkd
// files, an FCOS guest NetworkManager keyfiles) unless the server forces
// one with Options.IgnitionVariant.
func TestIgnitionVariantFromSpec(t *testing.T) {
	flatcar := testRecord(t, instanceDoc("vm-fc", []string{"127.0.0.2"}, "  agent: ignition\n  ignition: {variant: flatcar}\n"), "1")
	fcos := testRecord(t, instanceDoc("vm-fcos", []string{"127.0.0.3"}, "  agent: ignition\n"), "1")
	store := testStore(t, flatcar, fcos)
	for _, tc := range []struct {
		forced           ignition.Variant
		flatcar, fcosNet string
	}{
		{"", "/etc/systemd/network/", "/etc/NetworkManager/system-connections/"},
		{ignition.FCOS, "/etc/NetworkManager/system-connections/", "/etc/NetworkManager/system-connections/"},
	} {
		srv, _ := serve(t, NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger(), IgnitionVariant: tc.forced}))
		if r := get(t, clientFrom("127.0.0.2"), srv.URL+"/ignition/config"); r.status != 200 || !strings.Contains(r.body, tc.flatcar) {
			t.Errorf("forced %q: the flatcar instance's config lacks %s: %d %.300s", tc.forced, tc.flatcar, r.status, r.body)
		}
		if r := get(t, clientFrom("127.0.0.3"), srv.URL+"/ignition/config"); r.status != 200 || !strings.Contains(r.body, tc.fcosNet) {
			t.Errorf("forced %q: the fcos instance's config lacks %s: %d %.300s", tc.forced, tc.fcosNet, r.status, r.body)
		}
	}
}
