package mdserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
)

// FuzzGuestRequest sends the guest handler arbitrary requests (method,
// path, source, X-Forwarded-For, X-Vminit-Instance, IMDSv2 token) and
// holds it to what the security model promises: no panic, no redirect, no
// HTML, no 500 for healthy instances; a VM never gets another instance's
// data, whatever it sends; with an HMAC key a trusted proxy is served only
// for a header that verifies.
func FuzzGuestRequest(f *testing.F) {
	key := []byte("proxy-secret-0123456789")
	now := time.Unix(1_700_000_000, 0)
	signed := SignInstance(key, "vm-bb", "", now.Add(time.Minute))
	for _, s := range []struct {
		method, path, xff, inst, token string
		src                            byte
		withKey                        bool
	}{
		{"GET", "/latest/meta-data/instance-id", "", "", "", 2, false},
		{"GET", "/latest/meta-data/instance-id", "127.0.0.3", "", "", 2, true},
		{"GET", "/openstack/latest/meta_data.json", "127.0.0.3", "", "", 5, false},
		{"GET", "/openstack/latest/meta_data.json", "127.0.0.3", "", "", 5, true},
		{"GET", "/nocloud/user-data", "", signed, "", 5, true},
		{"GET", "/nocloud/user-data", "", signed + "0", "", 5, true},
		{"GET", "/latest/user-data", "", "", "AAAAAGsF8iD5o9sYmB26yTT23XIxEZnwVqJZDH0SLjA", 2, false},
		{"PUT", "/latest/api/token", "", "", "", 2, false},
		{"POST", "/openstack/latest/password", "", "", "", 3, false},
		{"GET", "//latest/../openstack/", "1.2.3.4, 127.0.0.5", "", "", 5, false},
		{"GET", "/ignition/pointer?transport=ec2", "", "", "", 2, false},
		{"DELETE", "/", "::ffff:127.0.0.3", "", "", 5, false},
		{"POST", "/vminit/v1/events", "127.0.0.3", "", "", 2, false},
		{"GET", "/vminit/v1/report", "", signed, "", 5, true},
	} {
		f.Add(s.method, s.path, s.xff, s.inst, s.token, s.src, s.withKey)
	}
	store := testStore(f,
		testRecord(f, instanceDoc("vm-a", []string{"127.0.0.2"}, "    imdsv2: required\n    dialects: [ec2, nocloud, openstack, ignition]\n"), "1"),
		testRecord(f, instanceDoc("vm-bb", []string{"127.0.0.3"}, ""), "1"))
	proxy := []netip.Prefix{netip.MustParsePrefix("127.0.0.5/32")}
	clock := func() time.Time { return now }
	handlers := map[bool]*Handler{
		false: NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger(), TrustedProxies: proxy, Now: clock, MaxBodyBytes: 64}),
		true:  NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger(), TrustedProxies: proxy, Now: clock, MaxBodyBytes: 64, HMACKey: key}),
	}
	bb, _ := store.Snapshot().ByName("vm-bb")
	f.Fuzz(func(t *testing.T, method, path, xff, inst, token string, src byte, withKey bool) {
		if method == "" || len(path) > 4096 {
			return
		}
		h := handlers[withKey]
		p, rawQuery, _ := strings.Cut(path, "?")
		r := (&http.Request{Method: method, URL: &url.URL{Path: p, RawQuery: rawQuery}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{}, Host: "169.254.169.254", RemoteAddr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, src}), 40000).String(),
			Body: http.NoBody}).WithContext(context.Background())
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		if inst != "" {
			r.Header.Set(HeaderInstance, inst)
		}
		if token != "" {
			r.Header.Set(HeaderToken, token)
		}
		if method == "PUT" {
			r.Header.Set(HeaderTokenTTL, "60")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		status, body := w.Code, w.Body.String()
		// A token needs the connection (its hop limit); without one it is a
		// 500, failing closed.
		if status >= 300 && status < 400 || status == 500 && !(method == "PUT" && p == "/latest/api/token") {
			t.Fatalf("%s %q: %d %q", method, path, status, body)
		}
		if status >= 400 && strings.ContainsAny(body, "<>") {
			t.Fatalf("%s %q: an error body that may be HTML: %q", method, path, body)
		}
		if status != 200 {
			return
		}
		servedB := strings.Contains(body, "vm-bb") || strings.Contains(body, bb.Instance().Spec.InstanceID)
		switch {
		case src == 2 && servedB:
			t.Fatalf("vm-a got vm-bb's data: %s %q xff %q inst %q", method, path, xff, inst)
		case src != 2 && src != 3 && src != 5:
			t.Fatalf("an unknown source was answered: %s %q %q", method, path, body)
		case src == 5 && withKey:
			if _, _, ok := h.verifyInstance(inst); !ok {
				t.Fatalf("a trusted proxy was served without a verified header: %s %q xff %q inst %q", method, path, xff, inst)
			}
		}
	})
}
