package mdserver

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

// The toy dialect exists in this file only: adding a dialect is one file
// with one register call (and, for a real one, its name in spec.Dialects
// so that users can list it). It serves GET /toy/hello, rendered once per
// record revision, to requests that carry the instance's name in
// X-Toy-Key: a token rule of its own.
var (
	toyRenders atomic.Int64

	toyGreeting = newPiece(func(_ *Handler, rec *registry.Record) ([]byte, error) {
		toyRenders.Add(1)
		return []byte("hello " + rec.Name + " (" + rec.Instance().Spec.FQDN + ")\n"), nil
	}, bytesLen)
)

func init() {
	register(&dialect{
		name:    "toy",
		title:   "Toy",
		paths:   []string{"/toy/hello (X-Toy-Key: the instance's name)"},
		readers: []DialectReader{{Agent: spec.AgentCloudInit, SMBIOS: func(host, _ string) string { return "type=1,serial=toy=http://" + host + "/toy/" }}},
		owns:    func(path string) bool { return strings.HasPrefix(path, "/toy/") },
		configure: func(h *Handler, mux *http.ServeMux) guard {
			mux.HandleFunc("GET /toy/hello", func(w http.ResponseWriter, r *http.Request) {
				rec := recordOf(w)
				b, err := toyGreeting.get(h, rec)
				if h.failed(w, rec, err) {
					return
				}
				serveBytes(w, textPlain, b)
			})
			return func(r *http.Request, rec *registry.Record) int {
				if r.Header.Get("X-Toy-Key") != rec.Name {
					return http.StatusUnauthorized
				}
				return 0
			}
		},
		crawl: func(c *crawler) { c.leaf("/toy/hello") },
	})
}

// testDialects are the dialects the tests register.
var testDialects = []string{"toy"}

// TestToyDialect: a dialect declared in one file is served by the real
// handler on loopback, with the handler's identification, its own token
// rule, spec.metadataServer's dialect choice, metrics, audit lines and
// previews.
func TestToyDialect(t *testing.T) {
	var audit bytes.Buffer
	metrics := NewMetrics()
	store := testStore(t,
		testRecord(t, instanceDoc("vm-a", []string{"127.0.0.2"}, ""), "1"),
		testRecord(t, instanceDoc("vm-bb", []string{"127.0.0.3"}, "    dialects: [ec2]\n"), "1"))
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Metrics: metrics, Logger: slog.New(slog.NewTextHandler(&audit, nil))})
	srv, _ := serve(t, h)
	a, bb := clientFrom("127.0.0.2"), clientFrom("127.0.0.3")
	key := map[string]string{"X-Toy-Key": "vm-a"}

	renders := toyRenders.Load()
	for range 2 {
		if r := do(t, a, "GET", srv.URL+"/toy/hello", key, ""); r.status != 200 || r.body != "hello vm-a (vm-a.example.com)\n" {
			t.Errorf("GET /toy/hello: %d %q", r.status, r.body)
		}
	}
	if n := toyRenders.Load() - renders; n != 1 {
		t.Errorf("rendered %d times for one revision, want 1", n)
	}
	if r := get(t, a, srv.URL+"/toy/hello"); r.status != 401 || r.body != "" {
		t.Errorf("without its key: %d %q, want an empty 401", r.status, r.body)
	}
	if r := get(t, a, srv.URL+"/toy/nothing"); r.status != 401 {
		t.Errorf("an unknown path is the dialect's: its guard first, got %d", r.status)
	}
	if r := do(t, a, "GET", srv.URL+"/toy/nothing", key, ""); r.status != 404 || r.body != "" {
		t.Errorf("an unknown path: %d %q, want an empty 404", r.status, r.body)
	}
	r := do(t, bb, "GET", srv.URL+"/toy/hello", map[string]string{"X-Toy-Key": "vm-bb"}, "")
	if r.status != 403 || !strings.Contains(r.body, "not served through the toy dialect") {
		t.Errorf("instance with dialects [ec2]: %d %q, want 403", r.status, r.body)
	}
	if r := do(t, clientFrom("127.0.0.9"), "GET", srv.URL+"/toy/hello", key, ""); r.status != 404 {
		t.Errorf("from an address nobody owns: %d, want 404", r.status)
	}

	var m strings.Builder
	metrics.WriteTo(&m)
	for _, want := range []string{`vminit_mdserver_requests_total{dialect="toy",code="200"} 2`, `vminit_mdserver_requests_total{dialect="toy",code="401"} 2`,
		`vminit_mdserver_requests_total{dialect="toy",code="403"} 1`, `vminit_mdserver_request_duration_seconds_count{dialect="toy"} 7`} {
		if !strings.Contains(m.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, m.String())
		}
	}
	if n := strings.Count(audit.String(), "dialect=toy"); n != 7 {
		t.Errorf("%d audit lines name the toy dialect, want 7:\n%s", n, audit.String())
	}

	rec, _ := store.Snapshot().ByName("vm-a")
	files, err := h.Crawl(context.Background(), rec, "toy")
	if err != nil || len(files) != 1 || files[0].Path != "/toy/hello" || !strings.HasPrefix(string(files[0].Data), "hello vm-a") {
		t.Errorf("Crawl: %v %v", files, err)
	}
}

// TestDialectsMatchSpec: every dialect the spec names is registered, and
// every registered dialect is one users can name in
// spec.metadataServer.dialects, but the guests' write path, which every
// instance is served (events.go); metrics list them in the spec's order.
func TestDialectsMatchSpec(t *testing.T) {
	var names []string
	for _, d := range dialects {
		names = append(names, d.name)
		if d.guestWrites != (d.name == DialectFirstBoot) {
			t.Errorf("%s: guestWrites %v", d.name, d.guestWrites)
		}
	}
	want := append(append(slices.Clone(spec.Dialects), DialectFirstBoot), append(testDialects, DialectOther)...)
	if !slices.Equal(names, want) {
		t.Errorf("dialects %v, want %v (spec.Dialects, the write path, the tests' own, other)", names, want)
	}
	if slices.Contains(spec.Dialects, DialectFirstBoot) {
		t.Errorf("%s is in spec.Dialects: a spec could stop its instance's first-boot reports", DialectFirstBoot)
	}
	for i, d := range dialects {
		if d.index != i {
			t.Errorf("%s: index %d, at %d", d.name, d.index, i)
		}
	}
}

// TestEC2SystemUUIDPassesDsIdentify: the SMBIOS identity that points a
// cloud-init guest at the EC2 dialect is one ds-identify takes.
func TestEC2SystemUUIDPassesDsIdentify(t *testing.T) {
	u := ec2SystemUUID("web-1")
	// ds-identify's ec2_identify_platform: uuid and serial both start with
	// ec2 and are equal; the kernel prints product_uuid in lower case.
	if !strings.HasPrefix(u, "ec2") || len(u) != 36 || strings.ToLower(u) != u || u[8] != '-' || u[13] != '-' {
		t.Errorf("ec2SystemUUID = %q", u)
	}
	if ec2SystemUUID("web-1") != u || ec2SystemUUID("web-2") == u {
		t.Error("ec2SystemUUID is not a function of the name")
	}
	if got, want := dialectNamed(DialectEC2).readers[0].SMBIOS("h", "web-1"), "serial="+u+",uuid="+u; !strings.HasSuffix(got, want) {
		t.Errorf("EC2's SMBIOS %q, want it to end %q", got, want)
	}
}
