package mdserver

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testing/ignitiontest"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/mdserver/registry"
)

const ignitionBin = ignitiontest.Binary

// ignitionInstance is an Ignition instance (its user data in every
// dialect is the Ignition config) identified by addrs.
func ignitionInstance(t testing.TB, addrs ...string) *registry.Record {
	doc := instanceDoc("ign-1", addrs, "") + `  files:
    - path: /etc/served-by-vminit
      content: "hello from the metadata server\n"
`
	doc = strings.Replace(doc, "metadata:\n  name: ign-1\n", "metadata:\n  name: ign-1\n  labels:\n    vminit.dev/user-data: ignition\n", 1)
	return testRecord(t, doc, "1")
}

// runIgnition runs the real ignition's fetch stage (ignitiontest.Fetch).
var runIgnition = ignitiontest.Fetch

// TestIgnitionFilePlatform: the real ignition binary, -platform file, with
// the server's pointer config (ignition.config.replace + sha512) as its
// config: it fetches /ignition/config, verifies the hash and caches it.
func TestIgnitionFilePlatform(t *testing.T) {
	testtools.RequireFile(t, ignitionBin)
	srv, _ := serve(t, NewHandler(testStore(t, ignitionInstance(t, "127.0.0.1")), Options{AllowLoopbackInstances: true, Logger: quietLogger()}))
	c := clientFrom("127.0.0.1")
	ptr := get(t, c, srv.URL+"/ignition/pointer")
	cfgFile := filepath.Join(t.TempDir(), "pointer.ign")
	os.WriteFile(cfgFile, []byte(ptr.body), 0o644)
	cache, err := runIgnition(t, "file", "IGNITION_CONFIG_FILE="+cfgFile)
	if err != nil {
		t.Fatalf("ignition: %v\n%s", err, err.(*exec.ExitError).Stderr)
	}
	if !strings.Contains(cache, "/etc/served-by-vminit") {
		t.Errorf("cache lacks the served config:\n%s", cache)
	}
	// A tampered hash is refused by Ignition.
	i := strings.Index(ptr.body, "sha512-") + len("sha512-")
	flip := "1"
	if ptr.body[i] == '1' {
		flip = "2"
	}
	os.WriteFile(cfgFile, []byte(ptr.body[:i]+flip+ptr.body[i+1:]), 0o644)
	if _, err := runIgnition(t, "file", "IGNITION_CONFIG_FILE="+cfgFile); err == nil {
		t.Error("ignition accepted a config whose sha512 does not match")
	} else if !strings.Contains(string(err.(*exec.ExitError).Stderr), "hash") {
		t.Errorf("ignition failed, but not on the hash:\n%s", err.(*exec.ExitError).Stderr)
	}
}

// TestIgnitionProviders runs ignition -platform aws and -platform
// openstack against the server at 169.254.169.254:80 inside a network
// namespace this test creates (the test binary re-executes itself under
// unshare -n; needs root).
func TestIgnitionProviders(t *testing.T) {
	if os.Getenv("VMINIT_NETNS_HELPER") != "" {
		return
	}
	testtools.RequireFile(t, ignitionBin)
	unshare := testtools.Require(t, "unshare")
	testtools.Require(t, "ip")
	if os.Geteuid() != 0 {
		testtools.Missing(t, "network namespaces need root")
	}
	for _, tc := range []string{"aws", "openstack", "aws/example", "openstack/example", "aws/required"} {
		t.Run(tc, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, unshare, "-n", "--", os.Args[0], "-test.run=^TestNetnsHelper$", "-test.v")
			cmd.Env = append(os.Environ(), "VMINIT_NETNS_HELPER="+tc)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "--- PASS: TestNetnsHelper") {
				t.Fatalf("%v\n%s", err, out)
			}
			t.Logf("%s", out)
		})
	}
}

// TestNetnsHelper runs inside the namespace TestIgnitionProviders made.
// It logs the headers Ignition sends: the aws platform an IMDSv2 token
// (so an instance with imdsv2: required is served, "aws/required"), the
// openstack platform nothing of the kind (see TestCloudInitDialectGate).
func TestNetnsHelper(t *testing.T) {
	platform, example := strings.CutSuffix(os.Getenv("VMINIT_NETNS_HELPER"), "/example")
	platform, required := strings.CutSuffix(platform, "/required")
	if platform == "" {
		t.Skip("helper for TestIgnitionProviders")
	}
	for _, args := range [][]string{{"link", "set", "lo", "up"}, {"addr", "add", "169.254.169.254/32", "dev", "lo"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	rec, want := ignitionInstance(t, "169.254.169.254", "127.0.0.1"), "/etc/served-by-vminit"
	if example {
		// The README's Ignition example, as written: its spec.agent alone
		// makes every dialect's user data the Ignition config.
		doc, err := os.ReadFile("../examples/fcos-server.yaml")
		if err != nil {
			t.Fatal(err)
		}
		doc = append(doc, "  metadataServer:\n    addresses: [169.254.169.254, 127.0.0.1]\n"...)
		rec, want = testRecord(t, string(doc), "1"), "/etc/motd.d/vminit"
	}
	if required {
		rec.Instance().Spec.MetadataServer.IMDSv2 = "required"
	}
	m := NewMetrics()
	log := &headerLog{next: NewHandler(testStore(t, rec), Options{AllowLoopbackInstances: true, Logger: quietLogger(), Metrics: m})}
	l, err := net.Listen("tcp", "169.254.169.254:80")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(log)
	go srv.Serve(l)
	defer srv.Close()
	cache, err := runIgnition(t, platform)
	if err != nil {
		t.Fatalf("ignition -platform %s: %v\n%s", platform, err, err.(*exec.ExitError).Stderr)
	}
	if !strings.Contains(cache, want) {
		t.Errorf("cache lacks the served config:\n%s", cache)
	}
	var sb strings.Builder
	m.WriteTo(&sb)
	t.Logf("requests:\n%s", grepLines(sb.String(), "requests_total"))
	tokens := 0
	for _, l := range log.lines() {
		t.Logf("ignition sent: %s", l)
		if strings.Contains(l, "X-Aws-Ec2-Metadata-Token: ") {
			tokens++
		}
		if strings.Contains(l, "Metadata-Flavor") {
			t.Errorf("ignition sent a flavor header: %s", l)
		}
	}
	if (tokens > 0) != (platform == "aws") {
		t.Errorf("-platform %s sent %d requests with an IMDSv2 token", platform, tokens)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
