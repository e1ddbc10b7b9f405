package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testing/etcdtest"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/dirstore"
	"github.com/vminit/vminit/mdserver/etcdstore"
	"github.com/vminit/vminit/mdserver/registry"
)

// TestUnauthenticatedBodiesRefusedAtOnce: requests without the token that
// announce a body and never send it are answered 401 at once and their
// connections closed, without waiting for the body.
func TestUnauthenticatedBodiesRefusedAtOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(NewHandler(newMemStore(), Options{Token: adminToken, Logger: slog.New(slog.DiscardHandler)}))
	go srv.Serve(ln)
	defer srv.Close()
	const n = 100
	var wg sync.WaitGroup
	var mu sync.Mutex
	var worst time.Duration
	for i := range n {
		wg.Go(func() {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			start := time.Now()
			c.SetDeadline(start.Add(20 * time.Second))
			auth := ""
			if i%2 == 1 {
				auth = "Authorization: Bearer wrong-token\r\n"
			}
			fmt.Fprintf(c, "PUT /v1/instances/x HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/yaml\r\nContent-Length: 100000\r\n\r\n", auth)
			br := bufio.NewReader(c)
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Errorf("no answer without a body: %v", err)
				return
			}
			io.Copy(io.Discard, res.Body)
			if _, err := br.ReadByte(); res.StatusCode != 401 || err != io.EOF {
				t.Errorf("answered %d; connection then: %v (want it closed)", res.StatusCode, err)
			}
			mu.Lock()
			worst = max(worst, time.Since(start))
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Logf("%d unauthenticated PUTs announcing 100,000-byte bodies never sent: each answered 401 and closed, the slowest in %v", n, worst)
	if srv.ReadHeaderTimeout == 0 || srv.ReadTimeout == 0 || srv.IdleTimeout == 0 {
		t.Errorf("admin server timeouts: header %v, read %v, idle %v", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.IdleTimeout)
	}
}

// TestErrorsAreJSON: an unclean path, a method a path does not serve and
// an unknown preview variant are JSON errors (400, 405, 400), never
// ServeMux's HTML redirect or plain-text 405, nor a 500.
func TestErrorsAreJSON(t *testing.T) {
	store := newMemStore()
	srv := httptest.NewServer(NewHandler(store, Options{Token: adminToken, Logger: slog.New(slog.DiscardHandler)}))
	defer srv.Close()
	if code, body := call(t, srv, "PUT", "/v1/instances/web", adminToken, webSpec); code != 200 {
		t.Fatalf("put: %d %s", code, body)
	}
	for _, tc := range []struct {
		method, path string
		status       int
		msg          string
	}{
		{"GET", "/v1//instances", 400, "not in canonical form"},
		{"GET", "//", 400, "not in canonical form"},
		{"GET", "/v1/instances/../instances", 400, "not in canonical form"},
		{"GET", "/v1/instances/./web", 400, "not in canonical form"},
		{"PATCH", "/v1/instances/web", 405, "method PATCH not allowed"},
		{"POST", "/v1/instances", 405, "method POST not allowed"},
		{"DELETE", "/v1/instances/web/preview", 405, "method DELETE not allowed"},
		{"GET", "/v2/x", 404, "no such endpoint"},
		{"GET", "/v1/instances/web/preview?dialect=ignition&variant=../../etc", 400, `variant: unknown Ignition variant "../../etc"`},
	} {
		c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", tc.method, tc.path, adminToken)
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		var eb ErrorBody
		b, _ := io.ReadAll(res.Body)
		c.Close()
		if res.StatusCode != tc.status || res.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &eb) != nil ||
			len(eb.Errors) != 1 || !strings.Contains(eb.Errors[0].Message, tc.msg) {
			t.Errorf("%s %s: %d %s %q, want %d %q", tc.method, tc.path, res.StatusCode, res.Header.Get("Content-Type"), b, tc.status, tc.msg)
		}
	}
}

// badIgnition are Ignition configs that parse as YAML strings but not as
// Ignition: every path that takes a spec must refuse them, as `vminit
// validate` does, naming the field.
var badIgnition = map[string]string{
	"truncated JSON":       `{"ignition": {"version": "3.4.0"}, "storage": {"files": [`,
	"100,000-deep nesting": `{"ignition": {"version": "3.4.0"}, "x": ` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`,
}

func ignitionDoc(config string) string {
	return fmt.Sprintf(`apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata:
  name: ign
spec:
  agent: ignition
  ignition:
    config: '%s'
  metadataServer:
    addresses: [127.0.0.2]
`, config)
}

// TestStoresRefuseWhatValidateRefuses: the directory store, the etcd store
// and the admin PUT run `vminit validate`'s checks (mdserver.StoreChecks):
// an Ignition config that does not parse is refused by PUT (422 naming
// spec.ignition.config) and by each store when written to its backend,
// and the last good version keeps being served in every dialect.
func TestStoresRefuseWhatValidateRefuses(t *testing.T) {
	opts := mdserver.Options{AllowLoopbackInstances: true, Logger: slog.New(slog.DiscardHandler)}
	checks := mdserver.StoreChecks(opts)
	type backend struct {
		store     registry.Store
		logs      *testtools.SyncBuffer
		writeBack func(doc string) // writes a version behind the API's back
	}
	stores := map[string]func(t *testing.T) backend{
		"dirstore": func(t *testing.T) backend {
			dir, logs := t.TempDir(), &testtools.SyncBuffer{}
			s, err := dirstore.Open(dir, dirstore.Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), Debounce: 20 * time.Millisecond, Checks: checks})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return backend{s, logs, func(doc string) {
				tmp := filepath.Join(dir, ".tmp")
				os.WriteFile(tmp, []byte(doc), 0o600)
				os.Rename(tmp, filepath.Join(dir, "ign.yaml"))
			}}
		},
		"etcdstore": func(t *testing.T) backend {
			e := etcdtest.Start(t, nil)
			logs := &testtools.SyncBuffer{}
			s, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: []string{e.ClientURL}, RequestTimeout: 5 * time.Second,
				Logger: slog.New(slog.NewTextHandler(logs, nil)), Checks: checks})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			cli := e.Client()
			return backend{s, logs, func(doc string) {
				if _, err := cli.Put(context.Background(), etcdstore.DefaultPrefix+"ign", doc); err != nil {
					t.Error(err)
				}
			}}
		},
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range stores {
			if !yield(k) {
				return
			}
		}
	}) {
		t.Run(name, func(t *testing.T) {
			b := stores[name](t)
			md := mdserver.NewHandler(b.store, opts)
			api := httptest.NewServer(NewHandler(b.store, Options{Token: adminToken, Logger: slog.New(slog.DiscardHandler), Metadata: md}))
			defer api.Close()
			guest := httptest.NewUnstartedServer(md)
			guest.Config = mdserver.NewServer(md)
			guest.Start()
			defer guest.Close()
			good := ignitionDoc(`{"ignition": {"version": "3.4.0"}, "storage": {"files": [{"path": "/etc/last-good"}]}}`)
			if code, body := call(t, api, "PUT", "/v1/instances/ign", adminToken, good); code != 200 {
				t.Fatalf("PUT of the good version: %d %s", code, body)
			}
			served := func(when string) {
				t.Helper()
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
				c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
				tok := ""
				if r, err := do(c, "PUT", guest.URL+"/latest/api/token", map[string]string{mdserver.HeaderTokenTTL: "60"}); err == nil {
					tok = r
				}
				for _, p := range []string{"/latest/user-data", "/openstack/latest/user_data", "/nocloud/user-data", "/ignition/config"} {
					body, err := do(c, "GET", guest.URL+p, map[string]string{mdserver.HeaderToken: tok})
					if err != nil || !strings.Contains(body, "/etc/last-good") {
						t.Errorf("%s: %s: %v %.100q", when, p, err, body)
					}
				}
			}
			served("the good version")
			for what, cfg := range badIgnition {
				code, body := call(t, api, "PUT", "/v1/instances/ign", adminToken, ignitionDoc(cfg))
				var eb ErrorBody
				json.Unmarshal([]byte(body), &eb)
				if code != 422 || len(eb.Errors) == 0 || eb.Errors[0].Field != "spec.ignition.config" {
					t.Errorf("PUT of %s: %d %.300s", what, code, body)
				}
				served("after a refused PUT of " + what)
				before := strings.Count(b.logs.String(), "spec.ignition.config")
				b.writeBack(ignitionDoc(cfg))
				deadline := time.Now().Add(20 * time.Second)
				for strings.Count(b.logs.String(), "spec.ignition.config") == before {
					if time.Now().After(deadline) {
						t.Fatalf("the store never logged the refused %s:\n%s", what, b.logs.String())
					}
					time.Sleep(20 * time.Millisecond)
				}
				served("after " + what + " was written to the store")
			}
		})
	}
}

// do sends a request and returns the body of a 200.
func do(c *http.Client, method, url string, hdr map[string]string) (string, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return "", err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		return string(b), fmt.Errorf("%s %s: %s", method, url, res.Status)
	}
	return string(b), nil
}

// TestPutOneDocument: a PUT body holds one spec; a second YAML document
// is refused, not stored and dropped.
func TestPutOneDocument(t *testing.T) {
	store := newMemStore()
	srv := httptest.NewServer(NewHandler(store, Options{Token: adminToken, Logger: slog.New(slog.DiscardHandler)}))
	defer srv.Close()
	code, body := call(t, srv, "PUT", "/v1/instances/web", adminToken, webSpec+"---\n"+strings.ReplaceAll(webSpec, "name: web", "name: other"))
	if code != 422 || !strings.Contains(body, "a second YAML document") || store.Snapshot().Len() != 0 {
		t.Errorf("two documents: %d %s; %d stored", code, body, store.Snapshot().Len())
	}
}

// TestPreviewWarnsOfUnservedDialects: a preview of a dialect the instance
// is not served through (imdsv2: required) says its guest gets 403 there.
func TestPreviewWarnsOfUnservedDialects(t *testing.T) {
	store := newMemStore()
	srv := httptest.NewServer(NewHandler(store, Options{Token: adminToken, Logger: slog.New(slog.DiscardHandler)}))
	defer srv.Close()
	if code, body := call(t, srv, "PUT", "/v1/instances/web", adminToken, strings.Replace(webSpec, `addresses: ["10.9.0.1"]`, `addresses: ["10.9.0.1"]`+"\n    imdsv2: required", 1)); code != 200 {
		t.Fatalf("put: %d %s", code, body)
	}
	for dialect, warned := range map[string]bool{"ec2": false, "openstack": true, "nocloud": true, "configdrive": false} {
		_, body := call(t, srv, "GET", "/v1/instances/web/preview?dialect="+dialect, adminToken, "")
		var p Preview
		json.Unmarshal([]byte(body), &p)
		got := slices.ContainsFunc(p.Warnings, func(w string) bool { return strings.Contains(w, "its guest gets 403 there") })
		if got != warned {
			t.Errorf("%s: warned %v, want %v: %v", dialect, got, warned, p.Warnings)
		}
	}
}
