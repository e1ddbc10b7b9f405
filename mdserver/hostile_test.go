package mdserver

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vminit/vminit/mdserver/registry"
)

// indexStore is a store over a registry.Index: records get the UIDs every
// real store's do, so that an instance deleted and defined again is a new
// incarnation.
type indexStore struct{ ix *registry.Index }

func newIndexStore() *indexStore {
	return &indexStore{registry.NewIndex(registry.IndexOptions{Logger: slog.New(slog.DiscardHandler)})}
}

func (s *indexStore) Snapshot() *registry.Snapshot { return s.ix.Snapshot() }

func (s *indexStore) put(t *testing.T, doc string) {
	t.Helper()
	rec, err := registry.DecodeDocument([]byte(doc), "")
	if err != nil {
		t.Fatal(err)
	}
	s.ix.Apply([]registry.Change{{Key: rec.Name, Record: rec}})
}

func (s *indexStore) delete(name string) { s.ix.Apply([]registry.Change{{Key: name}}) }

// rawRequest sends one request on a new connection from src and returns
// the response and, when wait > 0, whether the server closed the
// connection within wait after it.
func rawRequest(t *testing.T, src, addr, req string, wait time.Duration) (*http.Response, string, bool) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, req)
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%q: %v", req, err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if wait == 0 {
		return res, string(body), false
	}
	// A closed connection reads EOF at once; an open one times out.
	c.SetReadDeadline(time.Now().Add(wait))
	_, err = br.ReadByte()
	return res, string(body), err == io.EOF
}

// TestTrustedProxySignedOnly: with an HMAC key, a trusted proxy names
// instances with the signed header only; an unsigned X-Forwarded-For is
// refused (without a key, it is how the proxy names them). A proxy's own
// address identifies nobody.
func TestTrustedProxySignedOnly(t *testing.T) {
	key := []byte("proxy-secret-0123456789")
	proxy := []netip.Prefix{netip.MustParsePrefix("127.0.0.5/32")}
	store := testStore(t, testRecord(t, instanceDoc("vm-a", []string{"127.0.0.2"}, ""), "1"),
		testRecord(t, instanceDoc("proxy-self", []string{"127.0.0.5"}, ""), "1")) // a static store: no checks
	url := "/latest/meta-data/hostname"
	for _, tc := range []struct {
		name   string
		key    []byte
		hdr    map[string]string
		status int
	}{
		{"key, unsigned XFF", key, map[string]string{"X-Forwarded-For": "127.0.0.2"}, 403},
		{"key, signed", key, map[string]string{HeaderInstance: SignInstance(key, "vm-a", "", time.Now().Add(time.Minute))}, 200},
		{"key, nothing", key, nil, 404},
		{"no key, XFF", nil, map[string]string{"X-Forwarded-For": "127.0.0.2"}, 200},
		{"no key, nothing", nil, nil, 404},
	} {
		srv, _ := serve(t, NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger(), HMACKey: tc.key, TrustedProxies: proxy}))
		r := do(t, clientFrom("127.0.0.5"), "GET", srv.URL+url, tc.hdr, "")
		if r.status != tc.status || (r.status == 200) != (r.body == "vm-a.example.com") {
			t.Errorf("%s: %d %q, want %d", tc.name, r.status, r.body, tc.status)
		}
	}
}

// TestLoopbackInstances: a loopback source identifies nobody unless the
// server allows it; the store checks refuse loopback addresses and
// trusted proxies' addresses.
func TestLoopbackInstances(t *testing.T) {
	store := twoInstances(t, "")
	srv, _ := serve(t, NewHandler(store, Options{Logger: quietLogger()}))
	if r := get(t, clientFrom("127.0.0.2"), srv.URL+"/latest/meta-data/hostname"); r.status != 404 || !strings.Contains(r.body, "--allow-loopback-instances") {
		t.Errorf("a loopback source was served, or not told why: %d %q", r.status, r.body)
	}
	checks := StoreChecks(Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}})
	rec := testRecord(t, instanceDoc("vm", []string{"192.0.2.1", "127.0.0.2", "10.0.0.7", "'::1'"}, ""), "1")
	err := checks.Policy(rec)
	for _, want := range []string{
		"spec.metadataServer.addresses[1]: 127.0.0.2 is a loopback address",
		"spec.metadataServer.addresses[2]: 10.0.0.7 is inside trusted proxy network 10.0.0.0/24",
		"spec.metadataServer.addresses[3]: ::1 is a loopback address",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("policy: %v\nwant %q", err, want)
		}
	}
	if err := StoreChecks(Options{AllowLoopbackInstances: true}).Policy(rec); err != nil {
		t.Errorf("allowed loopback: %v", err)
	}
}

// TestIncarnations: the OpenStack password and IMDSv2 tokens belong to an
// incarnation of an instance: a successor of the same name and spec reads
// no password, posts its own, and its predecessor's tokens are refused;
// a spec edit keeps the password but ends the tokens.
func TestIncarnations(t *testing.T) {
	store := newIndexStore()
	doc := instanceDoc("vm-a", []string{"127.0.0.2"}, "    imdsv2: required\n    dialects: [ec2, openstack]\n")
	store.put(t, doc)
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger()})
	srv, _ := serve(t, h)
	c := clientFrom("127.0.0.2")
	pw := srv.URL + "/openstack/latest/password"
	token := func() string {
		return do(t, c, "PUT", srv.URL+"/latest/api/token", map[string]string{HeaderTokenTTL: "600"}, "").body
	}
	idWith := func(tok string) int {
		return do(t, c, "GET", srv.URL+"/latest/meta-data/instance-id", map[string]string{HeaderToken: tok}, "").status
	}
	if r := do(t, c, "POST", pw, nil, "first-secret"); r.status != 200 {
		t.Fatalf("POST: %d", r.status)
	}
	if r := do(t, c, "POST", pw, nil, "again"); r.status != 409 {
		t.Errorf("a second POST: %d", r.status)
	}
	tok := token()
	if idWith(tok) != 200 {
		t.Fatal("a fresh token is refused")
	}

	// An edit: the password stays, the token ends (clients ask anew).
	store.put(t, strings.Replace(doc, "alice", "bob", 1))
	if r := get(t, c, pw); r.body != "first-secret" {
		t.Errorf("after an edit the password is %q", r.body)
	}
	if idWith(tok) != 401 {
		t.Error("a token outlived a spec change")
	}
	tok = token()

	// Deleted and defined again, the same spec.
	store.delete("vm-a")
	if r := get(t, c, pw); r.status != 404 {
		t.Errorf("a deleted instance answered %d", r.status)
	}
	store.put(t, strings.Replace(doc, "alice", "bob", 1))
	if r := get(t, c, pw); r.status != 200 || r.body != "" {
		t.Errorf("the successor reads %d %q", r.status, r.body)
	}
	if idWith(tok) != 401 {
		t.Error("the predecessor's token is accepted")
	}
	if r := do(t, c, "POST", pw, nil, "second-secret"); r.status != 200 {
		t.Errorf("the successor's own POST: %d", r.status)
	}
	if r := get(t, c, pw); r.body != "second-secret" {
		t.Errorf("the successor's password reads %q", r.body)
	}
	if idWith(token()) != 200 {
		t.Error("the successor's own token is refused")
	}

	// Swept when the instance is gone.
	store.delete("vm-a")
	get(t, c, pw) // a request notices the new snapshot
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := 0
		h.passwords.Range(func(any, any) bool { n++; return true })
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d passwords kept after the instance is gone", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDialectGate: imdsv2: required serves the instance through EC2 only,
// with a token; the other dialects answer 403 saying why and what to do,
// unless spec.metadataServer.dialects lists them.
func TestDialectGate(t *testing.T) {
	store := testStore(t,
		testRecord(t, instanceDoc("req", []string{"127.0.0.2"}, "    imdsv2: required\n"), "1"),
		testRecord(t, instanceDoc("listed", []string{"127.0.0.3"}, "    imdsv2: required\n    dialects: [ec2, nocloud]\n"), "1"))
	srv, _ := serve(t, NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger()}))
	for _, tc := range []struct {
		src, path string
		status    int
		body      string
	}{
		{"127.0.0.2", "/openstack/latest/user_data", 403, "vminit: instance req is not served through the openstack dialect: its spec.metadataServer.imdsv2 is required, and the openstack dialect's clients send no IMDSv2 token; fetch through the EC2 paths with a token, or list openstack in spec.metadataServer.dialects to serve it without one\n"},
		{"127.0.0.2", "/nocloud/user-data", 403, "list nocloud in spec.metadataServer.dialects"},
		{"127.0.0.2", "/ignition/config", 403, "list ignition in spec.metadataServer.dialects"},
		{"127.0.0.2", "/openstack", 403, "openstack dialect"},
		{"127.0.0.2", "/latest/user-data", 401, ""},
		{"127.0.0.3", "/nocloud/user-data", 200, "#cloud-config"},
		{"127.0.0.3", "/openstack/latest/meta_data.json", 403, "spec.metadataServer.dialects lists only ec2, nocloud; add openstack there to serve it"},
	} {
		r := get(t, clientFrom(tc.src), srv.URL+tc.path)
		if r.status != tc.status || !strings.Contains(r.body, tc.body) {
			t.Errorf("%s %s: %d %q, want %d %q", tc.src, tc.path, r.status, r.body, tc.status, tc.body)
		}
		if r.status == 403 && r.header.Get("Content-Type") != textPlain {
			t.Errorf("%s: a 403 of type %q", tc.path, r.header.Get("Content-Type"))
		}
	}
	c := clientFrom("127.0.0.2")
	tok := do(t, c, "PUT", srv.URL+"/latest/api/token", map[string]string{HeaderTokenTTL: "60"}, "").body
	if r := do(t, c, "GET", srv.URL+"/latest/user-data", map[string]string{HeaderToken: tok}, ""); r.status != 200 {
		t.Errorf("EC2 with a token: %d", r.status)
	}
}

// TestErrorsAreNeverHTML: unclean paths and methods a path does not serve
// get an empty 400 and 405, not ServeMux's HTML redirect or plain-text
// 405; a request nobody owns is answered and its connection closed.
func TestErrorsAreNeverHTML(t *testing.T) {
	srv, _ := serve(t, NewHandler(twoInstances(t, ""), Options{AllowLoopbackInstances: true, Logger: quietLogger()}))
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		req    string
		status int
	}{
		{"GET //latest/meta-data/ HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"GET // HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"GET /latest/../latest/meta-data/ HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"GET /./nocloud/user-data HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"DELETE /latest/meta-data/ HTTP/1.1\r\nHost: x\r\n\r\n", 405},
		{"POST /nocloud/user-data HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 405},
		{"PUT /openstack/latest/password HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 405},
		// Absolute form, an empty path (found by FuzzGuestRequest: a panic).
		{"GET http://169.254.169.254 HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"GET http://169.254.169.254?x HTTP/1.1\r\nHost: x\r\n\r\n", 400},
	} {
		res, body, _ := rawRequest(t, "127.0.0.2", addr, tc.req, 0)
		if res.StatusCode != tc.status || body != "" {
			t.Errorf("%q: %d %q, want an empty %d", strings.SplitN(tc.req, "\r", 2)[0], res.StatusCode, body, tc.status)
		}
	}
	for _, req := range []string{
		"GET /latest/meta-data/ HTTP/1.1\r\nHost: x\r\n\r\n",
		// A body announced and never sent is not waited for.
		"POST /openstack/latest/password HTTP/1.1\r\nHost: x\r\nContent-Length: 200\r\n\r\n",
	} {
		res, _, closed := rawRequest(t, "127.0.0.9", addr, req, 5*time.Second)
		if res.StatusCode != 404 || !closed {
			t.Errorf("unknown source, %q: %d, connection closed %v", strings.SplitN(req, "\r", 2)[0], res.StatusCode, closed)
		}
	}
}

// TestRateLimitedConnectionsClose: a 429 closes the connection, so a VM
// over its rate does not also keep connections open.
func TestRateLimitedConnectionsClose(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	srv, _ := serve(t, NewHandler(twoInstances(t, ""), Options{AllowLoopbackInstances: true, Logger: quietLogger(), Rate: 1, Burst: 1, Now: func() time.Time { return now }}))
	addr := strings.TrimPrefix(srv.URL, "http://")
	req := "GET /latest/meta-data/ HTTP/1.1\r\nHost: x\r\n\r\n"
	if res, _, closed := rawRequest(t, "127.0.0.2", addr, req, 500*time.Millisecond); res.StatusCode != 200 || closed {
		t.Fatalf("first request: %d, closed %v", res.StatusCode, closed)
	}
	if res, _, closed := rawRequest(t, "127.0.0.2", addr, req, 5*time.Second); res.StatusCode != 429 || !closed {
		t.Errorf("over the rate: %d, connection closed %v", res.StatusCode, closed)
	}
}

func ExampleStoreChecks() {
	checks := StoreChecks(Options{})
	rec, _ := registry.DecodeDocument([]byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: a}\nspec:\n  metadataServer: {addresses: [127.0.0.1]}\n"), "")
	fmt.Println(checks.Content(rec) == nil, checks.Policy(rec) != nil)
	// Output: true true
}

// TestInstanceHeaderWindowAndIncarnation: a trusted proxy's signed
// X-Vminit-Instance header, built here from its documented format
// (docs/metadata-server.md) as a proxy author would, names one incarnation
// for a bounded time. It may be replayed within its lifetime; it is
// refused once expired (beyond the clock-skew allowance), when its expiry
// lies further ahead than the lifetime allows (a header leaked from a
// proxy's log worked until the year 3000), for a successor of the same
// name, and in the first format, which bound neither.
func TestInstanceHeaderWindowAndIncarnation(t *testing.T) {
	key := []byte("proxy-secret-0123456789")
	var clock atomic.Int64
	clock.Store(1_700_000_000)
	now := func() time.Time { return time.Unix(clock.Load(), 0) }
	store := newIndexStore()
	doc := instanceDoc("vm-a", []string{"127.0.0.2"}, "")
	uidOf := func() string { r, _ := store.Snapshot().ByName("vm-a"); return r.UID }
	store.put(t, doc)
	store.delete("vm-a")
	store.put(t, doc) // a second incarnation: a UID of its own
	old := uidOf()
	store.delete("vm-a")
	store.put(t, doc)
	cur := uidOf()
	if old == "" || cur == "" || old == cur {
		t.Fatalf("incarnations %q and %q", old, cur)
	}
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger(), HMACKey: key, Now: now,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.5/32")}})
	srv, _ := serve(t, h)
	proxy := clientFrom("127.0.0.5")
	status := func(header string) int {
		t.Helper()
		return do(t, proxy, "GET", srv.URL+"/latest/meta-data/hostname", map[string]string{HeaderInstance: header}, "").status
	}
	sign := func(fields ...string) string {
		msg := strings.Join(fields, ";")
		return msg + ";" + hex.EncodeToString(mac(key, msg))
	}
	at := func(d time.Duration) string { return strconv.FormatInt(now().Add(d).Unix(), 10) }

	fresh := sign("v2", "vm-a", cur, at(time.Minute))
	if got := SignInstance(key, "vm-a", cur, now().Add(time.Minute)); got != fresh {
		t.Errorf("SignInstance = %q, the documented format %q", got, fresh)
	}
	for _, c := range []struct {
		what   string
		header string
		want   int
	}{
		{"a fresh header", fresh, 200},
		{"the same header again (replay within its lifetime)", fresh, 200},
		{"expiring at the longest lifetime", sign("v2", "vm-a", cur, at(InstanceHeaderLifetime)), 200},
		{"expired, within the clock-skew allowance", sign("v2", "vm-a", cur, at(-InstanceHeaderSkew/2)), 200},
		{"expired", sign("v2", "vm-a", cur, at(-InstanceHeaderSkew-time.Second)), 403},
		{"expiring too far ahead", sign("v2", "vm-a", cur, at(InstanceHeaderLifetime+InstanceHeaderSkew+time.Minute)), 403},
		{"expiring in the year 3000", sign("v2", "vm-a", cur, "32503680000"), 403},
		{"minted for the previous incarnation", sign("v2", "vm-a", old, at(time.Minute)), 403},
		{"for no incarnation", sign("v2", "vm-a", "", at(time.Minute)), 403},
		{"the first format (name;expiry;HMAC)", sign("vm-a", at(time.Minute)), 403},
		{"another version", sign("v3", "vm-a", cur, at(time.Minute)), 403},
	} {
		if got := status(c.header); got != c.want {
			t.Errorf("%s: %d, want %d (%s)", c.what, got, c.want, c.header)
		}
	}
	// The fresh header, replayed once its lifetime is over.
	clock.Add(int64((time.Minute + InstanceHeaderSkew).Seconds()))
	if got := status(fresh); got != 403 {
		t.Errorf("a header replayed after its expiry: %d", got)
	}
}

// TestTokenThroughAProxy: through a trusted proxy the server's socket
// leads to the proxy, so the IMDSv2 hop limit it would set there keeps no
// token inside the guest. A token PUT a trusted proxy forwards is refused
// unless the proxies are declared to set the hop limit themselves
// (Options.ProxiesSetHopLimit); then the answer says which, and the
// server's own socket keeps its TTL. A PUT carrying X-Forwarded-For (a
// proxy in the guest) is refused either way, as on EC2.
func TestTokenThroughAProxy(t *testing.T) {
	key := []byte("proxy-secret-0123456789")
	store := testStore(t, testRecord(t, instanceDoc("vm-a", []string{"127.0.0.2"}, "    imdsv2: required\n    tokenHopLimit: 2\n"), "1"))
	signed := map[string]string{HeaderInstance: SignInstance(key, "vm-a", "", time.Now().Add(time.Minute)), HeaderTokenTTL: "60"}
	for _, declared := range []bool{false, true} {
		srv, conns := serve(t, NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger(), HMACKey: key,
			TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.5/32")}, ProxiesSetHopLimit: declared}))
		proxy := clientFrom("127.0.0.5")
		proxy.Transport.(*http.Transport).DisableKeepAlives = false // the connection stays open to be read
		r := do(t, proxy, "PUT", srv.URL+"/latest/api/token", signed, "")
		if !declared {
			if r.status != 403 || r.body != "" {
				t.Errorf("undeclared proxy: %d %q, want an empty 403", r.status, r.body)
			}
			proxy.CloseIdleConnections()
			continue
		}
		if r.status != 200 || r.body == "" || r.header.Get(HeaderTokenHopLimit) != "2" {
			t.Fatalf("declared proxy: %d %q, %s %q", r.status, r.body, HeaderTokenHopLimit, r.header.Get(HeaderTokenHopLimit))
		}
		conns.mu.Lock()
		toProxy := conns.conns[len(conns.conns)-1]
		conns.mu.Unlock()
		if ttl, err := ConnHopLimit(toProxy); err != nil || ttl == 2 {
			t.Errorf("the server's socket to the proxy has TTL %d (%v): the proxy's hop is not the guest's", ttl, err)
		}
		get := map[string]string{HeaderInstance: signed[HeaderInstance], HeaderToken: r.body}
		if g := do(t, proxy, "GET", srv.URL+"/latest/meta-data/hostname", get, ""); g.status != 200 {
			t.Errorf("the token through the proxy: %d", g.status)
		}
		withXFF := map[string]string{HeaderInstance: signed[HeaderInstance], HeaderTokenTTL: "60", "X-Forwarded-For": "10.0.0.7"}
		if r := do(t, proxy, "PUT", srv.URL+"/latest/api/token", withXFF, ""); r.status != 403 {
			t.Errorf("a PUT that went through a proxy in the guest: %d", r.status)
		}
		proxy.CloseIdleConnections()
	}
}
