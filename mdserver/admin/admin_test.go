package admin

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/registry"
)

// memStore is a minimal Store for the admin API tests (the real stores
// have their own tests and import this package): an Index keyed by name.
type memStore struct {
	mu sync.Mutex
	ix *registry.Index
}

func newMemStore() *memStore {
	return &memStore{ix: registry.NewIndex(registry.IndexOptions{Logger: slog.New(slog.DiscardHandler)})}
}

func (m *memStore) Snapshot() *registry.Snapshot { return m.ix.Snapshot() }

func (m *memStore) Put(_ context.Context, doc []byte) (*registry.Record, error) {
	rec, err := registry.DecodeDocument(doc, "")
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.ix.Check(rec.Name, rec); err != nil {
		return nil, err
	}
	m.ix.Apply([]registry.Change{{Key: rec.Name, Record: rec}})
	return rec, nil
}

func (m *memStore) Delete(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ix.Served(name) == nil {
		return registry.ErrNotFound
	}
	m.ix.Apply([]registry.Change{{Key: name}})
	return nil
}

const adminToken = "test-token-0123456789abcdef"

const webSpec = `apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata:
  name: web
spec:
  sshAuthorizedKeys:
    - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user@example
  files:
    - path: /etc/motd
      content: "hello\n"
  metadataServer:
    addresses: ["10.9.0.1"]
`

func call(t *testing.T, srv *httptest.Server, method, path, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAdminAPI(t *testing.T) {
	store := newMemStore()
	md := mdserver.NewHandler(store, mdserver.Options{Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(NewHandler(store, Options{Token: adminToken, MaxBodyBytes: 4096, Logger: slog.New(slog.DiscardHandler), Metadata: md}))
	defer srv.Close()

	// Auth on every endpoint.
	for _, tok := range []string{"", "wrong", adminToken + "x"} {
		for _, ep := range [][2]string{{"GET", "/v1/instances"}, {"PUT", "/v1/instances/web"}, {"DELETE", "/v1/instances/web"}, {"GET", "/v1/instances/web/preview"}, {"GET", "/nope"}} {
			if code, body := call(t, srv, ep[0], ep[1], tok, webSpec); code != 401 || !strings.Contains(body, `"errors"`) {
				t.Errorf("%s %s with token %q: %d %s", ep[0], ep[1], tok, code, body)
			}
		}
	}
	// An empty configured token refuses everything.
	open := httptest.NewServer(NewHandler(store, Options{}))
	if code, _ := call(t, open, "GET", "/v1/instances", "", ""); code != 401 {
		t.Errorf("no token configured: %d", code)
	}
	open.Close()

	// Invalid spec → 422 with field errors and lines.
	code, body := call(t, srv, "PUT", "/v1/instances/web", adminToken, strings.Replace(webSpec, "path: /etc/motd", "path: etc/motd\n      bogus: 1", 1))
	var eb ErrorBody
	json.Unmarshal([]byte(body), &eb)
	if code != 422 || len(eb.Errors) < 2 {
		t.Fatalf("invalid spec: %d %s", code, body)
	}
	fields := map[string]int{}
	for _, e := range eb.Errors {
		fields[e.Field] = e.Line
	}
	if fields["spec.files[0].bogus"] != 10 || fields["spec.files[0].path"] != 9 {
		t.Errorf("field errors: %s", body)
	}
	// Name mismatch, source.file, too large, bad method.
	if code, body := call(t, srv, "PUT", "/v1/instances/other", adminToken, webSpec); code != 422 || !strings.Contains(body, `"field": "metadata.name"`) {
		t.Errorf("name mismatch: %d %s", code, body)
	}
	if code, body := call(t, srv, "PUT", "/v1/instances/web", adminToken, strings.Replace(webSpec, `content: "hello\n"`, "source: {file: /etc/passwd}", 1)); code != 422 || !strings.Contains(body, "source.file") {
		t.Errorf("source.file: %d %s", code, body)
	}
	if code, _ := call(t, srv, "PUT", "/v1/instances/web", adminToken, webSpec+"# "+strings.Repeat("x", 5000)+"\n"); code != 413 {
		t.Errorf("oversized body: %d", code)
	}
	if code, body := call(t, srv, "POST", "/v1/instances", adminToken, ""); code != 405 || !strings.Contains(body, `"errors"`) {
		t.Errorf("POST: %d %s", code, body)
	}

	// put / get / list / conflict / delete.
	if code, body := call(t, srv, "PUT", "/v1/instances/web", adminToken, webSpec); code != 200 || !strings.Contains(body, `"10.9.0.1"`) {
		t.Fatalf("put: %d %s", code, body)
	}
	// The stored spec with its defaults filled in (a file's mode, the
	// metadata server's region and hop limit).
	if code, body := call(t, srv, "GET", "/v1/instances/web", adminToken, ""); code != 200 || !strings.Contains(body, "name: web") || !strings.Contains(body, "/etc/motd") ||
		!strings.Contains(body, `mode: "0644"`) || !strings.Contains(body, "region: vminit") || !strings.Contains(body, "tokenHopLimit: 1") {
		t.Errorf("get: %d %s", code, body)
	} else if rec, err := registry.DecodeDocument([]byte(body), ""); err != nil || rec.Name != "web" {
		t.Errorf("the stored spec does not load back: %v", err)
	}
	code, body = call(t, srv, "GET", "/v1/instances", adminToken, "")
	var list InstanceList
	json.Unmarshal([]byte(body), &list)
	if code != 200 || len(list.Instances) != 1 || list.Instances[0].Name != "web" || list.Instances[0].Addresses[0] != "10.9.0.1" {
		t.Errorf("list: %d %s", code, body)
	}
	// The incarnation a trusted proxy signs its X-Vminit-Instance for
	// (a web deleted and stored again is a new one, with a UID).
	call(t, srv, "DELETE", "/v1/instances/web", adminToken, "")
	call(t, srv, "PUT", "/v1/instances/web", adminToken, webSpec)
	_, body = call(t, srv, "GET", "/v1/instances", adminToken, "")
	list = InstanceList{}
	json.Unmarshal([]byte(body), &list)
	if rec, _ := store.Snapshot().ByName("web"); len(list.Instances) != 1 || rec.UID == "" || list.Instances[0].UID != rec.UID {
		t.Errorf("list: %s; the record's UID is %q", body, rec.UID)
	}
	thief := strings.ReplaceAll(webSpec, "name: web", "name: thief")
	if code, body := call(t, srv, "PUT", "/v1/instances/thief", adminToken, thief); code != 409 {
		t.Errorf("address conflict: %d %s", code, body)
	}

	// Preview.
	for dialect, want := range map[string][]string{
		"nocloud":     {"meta-data", "user-data", "instance-id"},
		"configdrive": {"openstack/latest/meta_data.json", "openstack/latest/user_data"},
		"ignition":    {"config.ign", "/etc/motd"},
		"ec2": {"/latest/meta-data/instance-id", "/latest/meta-data/public-keys/0/openssh-key",
			"/latest/meta-data/placement/availability-zone", "/latest/user-data", "/latest/dynamic/instance-identity/document"},
		"openstack": {"/openstack/latest/meta_data.json", "/openstack/latest/user_data", "/openstack/latest/vendor_data2.json"},
	} {
		code, body := call(t, srv, "GET", "/v1/instances/web/preview?dialect="+dialect, adminToken, "")
		var p Preview
		json.Unmarshal([]byte(body), &p)
		if code != 200 || p.Dialect != dialect || len(p.Files) == 0 {
			t.Errorf("preview %s: %d %s", dialect, code, body)
			continue
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("preview %s lacks %q: %s", dialect, w, body)
			}
		}
	}
	noMD := httptest.NewServer(NewHandler(store, Options{Token: adminToken, Logger: slog.New(slog.DiscardHandler)}))
	defer noMD.Close()
	// Without Options.Metadata the previews use a handler of their own:
	// the ec2 preview works (it answered 501 when Metadata was an
	// http.Handler that had to be type-asserted).
	if code, body := call(t, noMD, "GET", "/v1/instances/web/preview?dialect=ec2", adminToken, ""); code != 200 || !strings.Contains(body, "/latest/meta-data/instance-id") {
		t.Errorf("ec2 preview without the metadata handler: %d %s", code, body)
	}
	if code, _ := call(t, srv, "GET", "/v1/instances/web/preview?dialect=gopher", adminToken, ""); code != 400 {
		t.Errorf("unknown dialect: %d", code)
	}
	if code, _ := call(t, srv, "GET", "/v1/instances/nope/preview", adminToken, ""); code != 404 {
		t.Errorf("preview of a missing instance: %d", code)
	}

	if code, _ := call(t, srv, "DELETE", "/v1/instances/web", adminToken, ""); code != 204 {
		t.Errorf("delete: %d", code)
	}
	if code, _ := call(t, srv, "DELETE", "/v1/instances/web", adminToken, ""); code != 404 {
		t.Errorf("delete again: %d", code)
	}
	if code, _ := call(t, srv, "GET", "/v1/instances/web", adminToken, ""); code != 404 {
		t.Errorf("get after delete: %d", code)
	}
}

// TestPreviewIgnitionInstance: the nocloud and configdrive previews of an
// Ignition instance show what its guest gets, the Ignition config, not a
// cloud-init user-data it is never served.
func TestPreviewIgnitionInstance(t *testing.T) {
	store := newMemStore()
	srv := httptest.NewServer(NewHandler(store, Options{Token: adminToken, Logger: slog.New(slog.DiscardHandler)}))
	defer srv.Close()
	doc := strings.Replace(webSpec, "spec:\n", "spec:\n  agent: ignition\n", 1)
	if code, body := call(t, srv, "PUT", "/v1/instances/web", adminToken, doc); code != 200 {
		t.Fatalf("put: %d %s", code, body)
	}
	for dialect, userData := range map[string]string{"nocloud": "user-data", "configdrive": "openstack/latest/user_data"} {
		code, body := call(t, srv, "GET", "/v1/instances/web/preview?dialect="+dialect, adminToken, "")
		var p Preview
		json.Unmarshal([]byte(body), &p)
		var got string
		for _, f := range p.Files {
			if f.Path == userData {
				got = f.Content
			}
		}
		if code != 200 || !strings.HasPrefix(got, `{"ignition":{"version":"3.`) {
			t.Errorf("%s preview: %d, %s is %q\n%s", dialect, code, userData, got, body)
		}
	}
}
