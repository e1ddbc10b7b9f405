package mdserver

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/seed"
)

// pyFinalReporting prints the reporting config first boot takes from each
// user data (base64): the cloud-init user-data processing and merge.
const pyFinalReporting = cloudinittest.FinalConfig + `
import json, sys
json.dump([final_config(base64.b64decode(b))[0].get("reporting") for b in json.load(sys.stdin)], sys.stdout)
`

// finalReporting returns the reporting handlers cloud-init's own code makes
// of each user data.
func finalReporting(t *testing.T, uds ...string) []map[string]map[string]any {
	t.Helper()
	var in []string
	for _, ud := range uds {
		in = append(in, base64.StdEncoding.EncodeToString([]byte(ud)))
	}
	var out []map[string]map[string]any
	cloudinittest.Run(t, pyFinalReporting, in, &out)
	return out
}

// TestServedCloudInitReports: the real cloud-init datasources of every
// dialect get user data whose reporting webhook posts to the server as
// they reached it.
func TestServedCloudInitReports(t *testing.T) {
	cloudinittest.Require(t)
	store := twoInstances(t, "")
	srv, _ := serve(t, NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger()}))
	var ec2, ostk struct{ Userdata string }
	cloudinittest.Run(t, pyEc2, map[string]any{"base": srv.URL, "src": "127.0.0.3", "aws": false}, &ec2)
	cloudinittest.Run(t, pyOpenStack, map[string]any{"base": srv.URL, "src": "127.0.0.3"}, &ostk)
	var nc struct{ UD string }
	cloudinittest.Run(t, pyNoCloud, map[string]any{"base": srv.URL + "/nocloud/", "src": "127.0.0.3"}, &nc)
	for i, rep := range finalReporting(t, ec2.Userdata, ostk.Userdata, nc.UD) {
		if hook := rep["vminit"]; hook["endpoint"] != srv.URL+bootreport.EventsPath || hook["type"] != "webhook" {
			t.Errorf("%s: reporting %v", []string{"ec2", "openstack", "nocloud"}[i], rep)
		}
	}
	if !strings.Contains(nc.UD, `Environment="VMINIT_REPORT_URL=`+srv.URL+bootreport.ReportPath+`"`) {
		t.Errorf("no report unit pointed at %s:\n%s", srv.URL, nc.UD)
	}
}

// guestGet is a guest's request to h from src with the Host header host.
func guestGet(t *testing.T, h http.Handler, src, host, path string) string {
	t.Helper()
	r := httptest.NewRequestWithContext(context.Background(), http.MethodGet, path, nil)
	r.RemoteAddr, r.Host = src+":40000", host
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	body, _ := io.ReadAll(w.Result().Body)
	if w.Code != http.StatusOK {
		t.Fatalf("%s from %s (Host %q): %d %s", path, src, host, w.Code, body)
	}
	return string(body)
}

// TestServedReportByHost: without Options.ReportURL each guest is pointed at
// the host it used, which changes nothing another guest gets; a Host that
// is no host gets the data without the report; the data of a base URL is
// rendered once, not per request.
func TestServedReportByHost(t *testing.T) {
	store := twoInstances(t, "")
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger()})
	endpoint := func(base string) string { return "endpoint: " + base + bootreport.EventsPath }
	a := guestGet(t, h, "127.0.0.2", "mds-a.example:8080", "/nocloud/user-data")
	b := guestGet(t, h, "127.0.0.3", "192.0.2.9", "/nocloud/user-data")
	if !strings.Contains(a, endpoint("http://mds-a.example:8080")) || !strings.Contains(b, endpoint("http://192.0.2.9")) {
		t.Errorf("not pointed at their Hosts:\n%s\n---\n%s", a, b)
	}
	// Many Hosts for one record: past the cache's bound, still each its own.
	for _, host := range []string{"h1", "h2", "h3", "h4", "h5", "h6", "mds-a.example:8080"} {
		if ud := guestGet(t, h, "127.0.0.2", host, "/nocloud/user-data"); !strings.Contains(ud, endpoint("http://"+host)) {
			t.Errorf("Host %s: pointed elsewhere", host)
		}
	}
	if again := guestGet(t, h, "127.0.0.3", "192.0.2.9", "/latest/user-data"); again != b {
		t.Errorf("the same guest got other bytes after others' Hosts")
	}
	plain, err := seed.UserData(mustRecord(t, store, "vm-a").Instance())
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"", "a/b", "a@b", "a?b"} {
		if ud := guestGet(t, h, "127.0.0.2", host, "/nocloud/user-data"); ud != string(plain) {
			t.Errorf("Host %q: %.200s", host, ud)
		}
	}
	rec := mustRecord(t, store, "vm-a")
	r := httptest.NewRequest(http.MethodGet, "/nocloud/user-data", nil)
	r.Host = "h1"
	first, err1 := h.cloudInitUserData(r, rec)
	second, err2 := h.cloudInitUserData(r, rec)
	if err1 != nil || err2 != nil || &first[0] != &second[0] {
		t.Errorf("rendered again for the same base URL (%v, %v)", err1, err2)
	}
}

// TestServedReportOptions: Options.ReportURL points every guest there,
// whatever its Host, the Ignition config's completion unit included;
// NoBootReports serves exactly what a seed and ignition.Render give.
func TestServedReportOptions(t *testing.T) {
	store := testStore(t,
		testRecord(t, instanceDoc("vm-c", []string{"127.0.0.2"}, ""), "1"),
		testRecord(t, instanceDoc("vm-ign", []string{"127.0.0.3"}, "  agent: ignition\n"), "1"))
	const url = "https://mds.example:8443/vminit"
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger(), ReportURL: url + "/"})
	if ud := guestGet(t, h, "127.0.0.2", "elsewhere", "/latest/user-data"); !strings.Contains(ud, "endpoint: "+url+bootreport.EventsPath) {
		t.Errorf("user data not pointed at ReportURL:\n%s", ud)
	}
	unit := `Environment=\"VMINIT_REPORT_URL=` + url + bootreport.ReportPath + `\"`
	if cfg := guestGet(t, h, "127.0.0.3", "elsewhere", "/ignition/config"); !strings.Contains(cfg, unit) {
		t.Errorf("Ignition config without the unit %s:\n%s", unit, cfg)
	}

	off := NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger(), NoBootReports: true})
	plain, err := seed.UserData(mustRecord(t, store, "vm-c").Instance())
	if err != nil {
		t.Fatal(err)
	}
	if ud := guestGet(t, off, "127.0.0.2", "h", "/openstack/latest/user_data"); ud != string(plain) {
		t.Errorf("NoBootReports: user data %.200s", ud)
	}
	res, err := ignition.Render(mustRecord(t, store, "vm-ign").Instance(), ignition.Options{AllowPartial: true})
	if err != nil {
		t.Fatal(err)
	}
	if cfg := guestGet(t, off, "127.0.0.3", "h", "/ignition/config"); cfg != string(res.Config) {
		t.Errorf("NoBootReports: Ignition config %.200s", cfg)
	}
}

// TestPreviewShowsReport: a preview (Crawl) shows the report going to
// PreviewHost, there being no guest's Host.
func TestPreviewShowsReport(t *testing.T) {
	store := twoInstances(t, "")
	h := NewHandler(store, Options{Logger: quietLogger()})
	files, err := h.Crawl(context.Background(), mustRecord(t, store, "vm-a"), DialectNoCloud)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f.Path, "user-data") && !strings.Contains(string(f.Data), "endpoint: "+h.ReportPreviewBase()+bootreport.EventsPath) {
			t.Errorf("preview user data without the report to %s", h.ReportPreviewBase())
		}
	}
}

func mustRecord(t *testing.T, store *registry.StaticStore, name string) *registry.Record {
	t.Helper()
	rec, ok := store.Snapshot().ByName(name)
	if !ok {
		t.Fatalf("no record %s", name)
	}
	return rec
}
