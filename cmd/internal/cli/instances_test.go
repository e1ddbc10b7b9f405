package cli

import (
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/mdserver/admin"
	"github.com/vminit/vminit/mdserver/dirstore"
)

// TestInstances drives `vminit instances` against a real admin API over a
// directory store on loopback.
func TestInstances(t *testing.T) {
	const token = "cli-test-token-0123456789"
	storeDir, work := t.TempDir(), t.TempDir()
	store, err := dirstore.Open(storeDir, dirstore.Options{NoWatch: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv := httptest.NewServer(admin.NewHandler(store, admin.Options{Token: token, Logger: slog.New(slog.DiscardHandler)}))
	defer srv.Close()
	tokenFile := filepath.Join(work, "token")
	os.WriteFile(tokenFile, []byte(token+"\n"), 0o600)
	t.Setenv("VMINIT_ADMIN_URL", "")
	t.Setenv("VMINIT_ADMIN_TOKEN", "")

	spec := func(name, addr string) string {
		p := filepath.Join(work, name+".yaml")
		os.WriteFile(filepath.Join(work, "banner.txt"), []byte("welcome\n"), 0o644)
		os.WriteFile(p, []byte(`apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata: {name: `+name+`}
spec:
  files:
    - path: /etc/banner
      source: {file: banner.txt}
  metadataServer: {addresses: [`+addr+`]}
`), 0o644)
		return p
	}
	flags := []string{"--server", srv.URL, "--token-file", tokenFile}
	in := func(args ...string) (int, string, string) {
		return run(t, append(append([]string{"instances"}, args...), flags...)...)
	}

	// Usage errors exit 2.
	if code, _, stderr := run(t, "instances", "list"); code != ExitUsage || !strings.Contains(stderr, "VMINIT_ADMIN_URL") {
		t.Errorf("no server: %d %s", code, stderr)
	}
	if code, _, stderr := run(t, "instances", "list", "--server", srv.URL); code != ExitUsage || !strings.Contains(stderr, "token") {
		t.Errorf("no token: %d %s", code, stderr)
	}
	if code, _, _ := in("get"); code != ExitUsage {
		t.Errorf("get without NAME: %d", code)
	}
	if code, _, _ := in("put"); code != ExitUsage {
		t.Errorf("put without SPEC: %d", code)
	}
	// A wrong token is exit 1 with the server's message.
	if code, _, stderr := run(t, "instances", "list", "--server", srv.URL, "--token-file", os.DevNull); code != ExitUsage {
		t.Errorf("empty token file: %d %s", code, stderr)
	}
	t.Setenv("VMINIT_ADMIN_URL", srv.URL)
	t.Setenv("VMINIT_ADMIN_TOKEN", "wrong-token-xxxxxxxxxxxx")
	if code, _, stderr := run(t, "instances", "list"); code != ExitInvalid || !strings.Contains(stderr, "401") {
		t.Errorf("wrong token: %d %s", code, stderr)
	}

	// put (source.file inlined), list, get, preview, delete.
	a, b := spec("web-1", "10.7.0.1"), spec("web-2", "10.7.0.2")
	code, stdout, stderr := in("put", a, b)
	if code != ExitOK || !strings.Contains(stdout, "stored web-1") || !strings.Contains(stdout, "stored web-2") {
		t.Fatalf("put: %d %s %s", code, stdout, stderr)
	}
	if got := store.Snapshot().Len(); got != 2 {
		t.Fatalf("the store holds %d instances", got)
	}
	if r, _ := store.Snapshot().ByName("web-1"); string(r.Instance().Spec.Files[0].Data()) != "welcome\n" {
		t.Errorf("source.file content not carried over: %q", r.Instance().Spec.Files[0].Data())
	}
	// The environment works as well as flags.
	t.Setenv("VMINIT_ADMIN_TOKEN", token)
	code, stdout, _ = run(t, "instances", "list")
	if code != ExitOK || !strings.Contains(stdout, "web-1") || !strings.Contains(stdout, "10.7.0.2") {
		t.Errorf("list: %d %s", code, stdout)
	}
	if code, stdout, _ := in("get", "web-2"); code != ExitOK || !strings.Contains(stdout, "name: web-2") {
		t.Errorf("get: %d %s", code, stdout)
	}
	if code, _, stderr := in("get", "nope"); code != ExitInvalid || !strings.Contains(stderr, "not found") {
		t.Errorf("get missing: %d %s", code, stderr)
	}
	if code, stdout, _ := in("preview", "web-1"); code != ExitOK || !strings.Contains(stdout, "==> user-data <==") || !strings.Contains(stdout, "#cloud-config") {
		t.Errorf("preview: %d %s", code, stdout)
	}
	if code, stdout, _ := in("preview", "web-1", "--dialect", "configdrive", "--output", "json"); code != ExitOK || !strings.Contains(stdout, "openstack/latest/meta_data.json") {
		t.Errorf("preview configdrive: %d %s", code, stdout)
	}
	if code, _, _ := in("preview", "web-1", "--output", "xml"); code != ExitUsage {
		t.Errorf("bad --output: %d", code)
	}

	// An invalid spec fails locally with its lines; a conflicting one is
	// refused by the server. Both exit 1.
	bad := filepath.Join(work, "bad.yaml")
	os.WriteFile(bad, []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: Bad}\n"), 0o644)
	if code, _, stderr := in("put", bad); code != ExitInvalid || !strings.Contains(stderr, "bad.yaml:3") {
		t.Errorf("invalid spec: %d %s", code, stderr)
	}
	if code, _, stderr := in("put", spec("thief", "10.7.0.1")); code != ExitInvalid || !strings.Contains(stderr, "409") {
		t.Errorf("conflicting spec: %d %s", code, stderr)
	}

	if code, stdout, _ := in("delete", "web-1"); code != ExitOK || !strings.Contains(stdout, "deleted web-1") {
		t.Errorf("delete: %d %s", code, stdout)
	}
	if code, _, _ := in("delete", "web-1"); code != ExitInvalid {
		t.Errorf("delete again: %d", code)
	}
	if store.Snapshot().Len() != 1 {
		t.Errorf("after delete: %v", store.Snapshot().Names())
	}

	// Platform objects are stored as the specs they mean; the server
	// serves what the platform's guest gets.
	vm := filepath.Join("..", "..", "..", "platform", "testdata", "kubevirt-configdrive.yaml")
	code, stdout, stderr = in("put", vm)
	if code != ExitOK || !strings.Contains(stdout, "KubeVirt VirtualMachine prod/web-1: stored web-1") {
		t.Fatalf("put a VirtualMachine: %d %s %s", code, stdout, stderr)
	}
	if r, ok := store.Snapshot().ByName("web-1"); !ok || !r.Instance().Spec.CloudInit.UserDataOnly || len(r.Instance().Spec.SSHAuthorizedKeys) != 2 {
		t.Errorf("the stored VM: %+v", r)
	}
	code, stdout, _ = in("preview", "web-1", "--dialect", "configdrive")
	if code != ExitOK || !strings.Contains(stdout, "==> openstack/latest/user_data <==\n#cloud-config\npackages: [nginx]\nruncmd:\n- systemctl enable --now nginx\n") {
		t.Errorf("preview of the VM: %d %s", code, stdout)
	}
	sysprep := filepath.Join("..", "..", "..", "platform", "testdata", "kubevirt-sysprep.yaml")
	if code, _, stderr := in("put", sysprep); code != ExitInvalid || !strings.Contains(stderr, "only a sysprep disc") {
		t.Errorf("put a Windows VM: %d %s", code, stderr)
	}
}
