package delivery

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v34 "github.com/coreos/ignition/v2/config/v3_4"

	"github.com/vminit/vminit/internal/testing/qemutest"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

func TestQEMUArgs(t *testing.T) {
	got := strings.Join(QEMUArgs("/var/lib/vms/a,b/config.ign"), " ")
	if want := "-fw_cfg name=opt/com.coreos/config,file=/var/lib/vms/a,,b/config.ign"; got != want {
		t.Errorf("QEMUArgs = %q, want %q", got, want)
	}
	if got := strings.Join(QEMUDiskArgs("/x.ign"), " "); !strings.Contains(got, "serial=ignition") {
		t.Errorf("QEMUDiskArgs = %q", got)
	}
}

func TestLibvirtXML(t *testing.T) {
	path := "/srv/vm's <config>&.ign"
	var si struct {
		Type  string `xml:"type,attr"`
		Entry struct {
			Name string `xml:"name,attr"`
			File string `xml:"file,attr"`
		} `xml:"entry"`
	}
	if err := xml.Unmarshal([]byte(LibvirtSysinfo(path)), &si); err != nil {
		t.Fatal(err)
	}
	if si.Type != "fwcfg" || si.Entry.Name != FwCfgName || si.Entry.File != path {
		t.Errorf("sysinfo = %+v", si)
	}
	var cl struct {
		Args []struct {
			Value string `xml:"value,attr"`
		} `xml:"arg"`
	}
	if err := xml.Unmarshal([]byte(LibvirtQEMUCommandline(path)), &cl); err != nil {
		t.Fatal(err)
	}
	if len(cl.Args) != 2 || cl.Args[0].Value != "-fw_cfg" || cl.Args[1].Value != QEMUArgs(path)[1] {
		t.Errorf("commandline = %+v", cl)
	}
}

func TestGuestinfoRoundTrip(t *testing.T) {
	config := []byte(`{"ignition":{"version":"3.0.0"}}`)
	kv := Guestinfo(config)
	if kv[1] != [2]string{"guestinfo.ignition.config.data.encoding", "gzip+base64"} {
		t.Errorf("encoding key = %v", kv[1])
	}
	raw, err := base64.StdEncoding.DecodeString(kv[0][1])
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(zr); !bytes.Equal(got, config) {
		t.Errorf("decoded %q", got)
	}
	// Same config, same bytes: the gzip header must carry no time and no
	// file name (RFC 1952: MTIME at bytes 4-7, FNAME and FCOMMENT flags).
	if raw[3]&0x18 != 0 || !bytes.Equal(raw[4:8], []byte{0, 0, 0, 0}) {
		t.Errorf("gzip header % x names a file or a time: not reproducible", raw[:10])
	}
}

// bigConfig is a valid 3.4 config of about n bytes of incompressible data.
func bigConfig(t testing.TB, n int) []byte {
	b := make([]byte, n*3/4)
	rand.Read(b)
	return []byte(fmt.Sprintf(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/big","contents":{"source":"data:;base64,%s"}}]}}`, base64.StdEncoding.EncodeToString(b)))
}

func TestFit(t *testing.T) {
	ec2, err := LookupTransport("ec2")
	if err != nil {
		t.Fatal(err)
	}
	small := []byte(`{"ignition":{"version":"3.0.0"}}`)
	if p, pub, err := Fit(small, ec2, "", nil); err != nil || !bytes.Equal(p, small) || pub != nil {
		t.Errorf("small config: %q %q %v", p, pub, err)
	}
	big := bigConfig(t, 20000)
	_, _, err = Fit(big, ec2, "", nil)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), fmt.Sprintf("%d bytes", len(big))) || !strings.Contains(err.Error(), "16384") {
		t.Errorf("too large without URL: %v", err)
	}
	pointer, publish, err := Fit(big, ec2, "https://example.com/cfg.ign", http.Header{"Authorization": {"Bearer x"}})
	if err != nil || !bytes.Equal(publish, big) || len(pointer) > ec2.Limit {
		t.Fatalf("pointer: %s, %v", pointer, err)
	}
	if _, rep, err := v34.Parse(pointer); err != nil || rep.IsFatal() {
		t.Errorf("the pointer config does not validate: %v %v\n%s", err, rep, pointer)
	}
	if _, err := LookupTransport("floppy"); !errors.Is(err, ErrUnknownTransport) {
		t.Errorf("unknown transport: %v", err)
	}
}

// TestPointerWithRealIgnition serves a large config on loopback and lets
// the real ignition binary follow the pointer: a right hash applies, a
// wrong one fails.
func TestPointerWithRealIgnition(t *testing.T) {
	bin := testtools.RequireFile(t, "/usr/lib/dracut/modules.d/30ignition/ignition")
	validate := testtools.Require(t, "ignition-validate")
	full := []byte(`{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"/etc/from-pointer","mode":420,"contents":{"source":"data:,fetched"}},` +
		`{"path":"/etc/padding","mode":420,"contents":{"source":"data:,` + strings.Repeat("x", 1000) + `"}}]}}`)
	served := full
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Token") != "s3cret" {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		w.Write(served)
	}))
	defer srv.Close()
	tiny := Transport{Name: "tiny", Limit: 600, Source: "a test budget"}
	pointer, _, err := Fit(full, tiny, srv.URL+"/config.ign", http.Header{"X-Token": {"s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(full) <= tiny.Limit || bytes.Equal(pointer, full) {
		t.Fatal("the test config should not fit, and Fit should have made a pointer")
	}
	dir := t.TempDir()
	pf := filepath.Join(dir, "pointer.ign")
	os.WriteFile(pf, pointer, 0o644)
	if out, err := exec.Command(validate, pf).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("ignition-validate: %v %s", err, out)
	}
	fetch := func() ([]byte, error) {
		cache := filepath.Join(t.TempDir(), "cache.json")
		cmd := exec.Command(bin, "-platform", "file", "-stage", "fetch", "-log-to-stdout", "-root", t.TempDir(), "-config-cache", cache, "-state-file", filepath.Join(t.TempDir(), "state"))
		cmd.Env = append(os.Environ(), "IGNITION_CONFIG_FILE="+pf)
		timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
		defer timer.Stop()
		if out, err := cmd.CombinedOutput(); err != nil {
			return out, err
		}
		return os.ReadFile(cache)
	}
	cache, err := fetch()
	if err != nil || !strings.Contains(string(cache), "/etc/from-pointer") {
		t.Errorf("ignition did not apply the pointed-to config: %v\n%s", err, cache)
	}
	served = bytes.Replace(full, []byte("fetched"), []byte("tampered"), 1)
	if out, err := fetch(); err == nil {
		t.Errorf("ignition accepted a config whose hash does not match:\n%s", out)
	}
}

// TestFwCfgInKernel passes a config through QEMU fw_cfg and reads it back
// in a real kernel, byte for byte, where Ignition's qemu platform reads it.
func TestFwCfgInKernel(t *testing.T) {
	config := bigConfig(t, 100000)
	p := filepath.Join(t.TempDir(), "config.ign")
	os.WriteFile(p, config, 0o644)
	if got := qemutest.ReadFwCfg(t, FwCfgName, p); !bytes.Equal(got, config) {
		t.Errorf("the guest read %d bytes that differ from the %d passed", len(got), len(config))
	}
}

// TestPointerVersion: headers need spec 3.1, compared as versions (a
// pointer is never older than the config it points to), and only a 3.x
// config has a pointer.
func TestPointerVersion(t *testing.T) {
	for _, tc := range []struct {
		config  string
		headers http.Header
		want    string
	}{
		{"3.0.0", nil, "3.0.0"},
		{"3.0.0", http.Header{"X": {"y"}}, "3.1.0"},
		{"3.4.0", http.Header{"X": {"y"}}, "3.4.0"},
		{"3.10.0", http.Header{"X": {"y"}}, "3.10.0"},
	} {
		p, err := Pointer([]byte(`{"ignition":{"version":"`+tc.config+`"}}`), "https://example.com/c.ign", tc.headers)
		if err != nil || !strings.Contains(string(p), `"version":"`+tc.want+`"`) {
			t.Errorf("%s with %v: %s %v, want version %s", tc.config, tc.headers, p, err, tc.want)
		}
	}
	if _, err := Pointer([]byte(`{"ignition":{"version":"2.2.0"}}`), "https://example.com/c.ign", nil); err == nil {
		t.Error("a pointer for a spec 2 config")
	}
}

// TestSeedsCarryTheSeedMetadata: a config drive or cidata seed carrying an
// Ignition config has the meta-data of the cloud-init seed of the same
// spec (the host name the FQDN when there is one, as every datasource
// reports it), not a copy of its own.
func TestSeedsCarryTheSeedMetadata(t *testing.T) {
	inst, err := spec.Parse([]byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: web-1}\nspec:\n  agent: ignition\n  fqdn: web-1.example.com\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	config := []byte(`{"ignition":{"version":"3.0.0"}}`)
	for _, ds := range seed.Datasources {
		s, err := Seed(config, inst, ds)
		if err != nil {
			t.Fatal(err)
		}
		want, err := seed.Metadata(inst, ds, seed.Options{})
		if err != nil {
			t.Fatal(err)
		}
		md := want[0] // meta-data, openstack/latest/meta_data.json
		if got, ok := s.Lookup(md.Path); !ok || !bytes.Equal(got, md.Data) || !bytes.Contains(got, []byte("web-1.example.com")) {
			t.Errorf("%s: %s is\n%s\nwant\n%s", ds, md.Path, got, md.Data)
		}
		if s.Label != ds.Label() {
			t.Errorf("%s: label %q", ds, s.Label)
		}
	}
}
