package cli

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/internal/testing/ignitiontest"
	"github.com/vminit/vminit/internal/testing/kubetest"
	"github.com/vminit/vminit/internal/testing/testtools"
)

// startCluster and createInstance are kubetest's, under their short names.
var (
	startCluster   = kubetest.StartWithInstances
	createInstance = kubetest.CreateInstance
)

// httpFrom is an HTTP client whose connections come from src, a guest's
// address on loopback.
func httpFrom(src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

func fetch(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("%s: %s %s", url, res.Status, b)
	}
	return string(b)
}

// TestServeKubernetes: `vminit serve --kubernetes` serves Instances created
// through the API to the real clients: cloud-init's Ec2 datasource and
// NoCloud-net, and the ignition binary; an update through the API is
// served next.
func TestServeKubernetes(t *testing.T) {
	cloudinittest.Require(t)
	testtools.RequireFile(t, ignitiontest.Binary)
	s, res := startCluster(t)
	createInstance(t, res, "web-1", "sshAuthorizedKeys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user@example']\n"+
		"users: [{name: alice}]\nmetadataServer: {addresses: [127.0.0.2]}\n")
	createInstance(t, res, "fcos-1", "agent: ignition\nfiles: [{path: /etc/served-by-vminit, content: \"from the cluster\\n\"}]\nmetadataServer: {addresses: [127.0.0.1]}\n")
	addr := freeAddr(t)
	stop := startServe(t, "--kubernetes", "--kubeconfig", s.Kubeconfig, "--namespace", "default", "--kubevirt", "false", "--spec-addresses", "default=127.0.0.0/8",
		"--listen", addr, "--log-format", "text")
	base := "http://" + addr
	waitServed := func(c *http.Client, url, want string) {
		t.Helper()
		for range 500 {
			if res, err := c.Get(url); err == nil {
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode == 200 && strings.Contains(string(b), want) {
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("%s never served %q\n%s", url, want, stop())
	}
	waitServed(httpFrom("127.0.0.2"), base+"/latest/meta-data/hostname", "web-1")

	var ec2 struct {
		OK         bool
		InstanceID string `json:"instance_id"`
		Userdata   string
		Keys       []string
		Hostname   string
	}
	cloudinittest.Run(t, cloudinittest.Ec2Client, map[string]any{"base": base, "src": "127.0.0.2", "aws": true}, &ec2)
	if !ec2.OK || ec2.Hostname != "web-1" || len(ec2.Keys) != 1 || !strings.Contains(ec2.Userdata, "alice") {
		t.Errorf("cloud-init Ec2: %+v", ec2)
	}
	var nc struct {
		MD map[string]any
		UD string
	}
	cloudinittest.Run(t, cloudinittest.NoCloudNetClient, map[string]any{"base": base + "/nocloud/", "src": "127.0.0.2"}, &nc)
	if nc.MD["instance-id"] != ec2.InstanceID || !strings.HasPrefix(nc.UD, "#cloud-config") {
		t.Errorf("cloud-init NoCloud-net: %+v", nc)
	}

	// Ignition, from 127.0.0.1: the pointer config, then the config.
	ptr := fetch(t, httpFrom("127.0.0.1"), base+"/ignition/pointer")
	cfgFile := filepath.Join(t.TempDir(), "pointer.ign")
	os.WriteFile(cfgFile, []byte(ptr), 0o644)
	cache, err := ignitiontest.Fetch(t, "file", "IGNITION_CONFIG_FILE="+cfgFile)
	if err != nil {
		t.Fatalf("ignition: %v\n%s", err, err.(*exec.ExitError).Stderr)
	}
	if !strings.Contains(cache, "/etc/served-by-vminit") {
		t.Errorf("ignition's config:\n%s", cache)
	}

	// Updated through the API: served next.
	u, _ := res.Get(context.Background(), "web-1", metav1.GetOptions{})
	unstructured.SetNestedField(u.Object, "renamed", "spec", "hostname")
	if _, err := res.Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitServed(httpFrom("127.0.0.2"), base+"/latest/meta-data/hostname", "renamed")
	if log := stop(); !strings.Contains(log, "instances loaded") {
		t.Errorf("serve's log:\n%s", log)
	}
}

// TestInstancesKubeconfig: `vminit instances --kubeconfig` puts, lists,
// shows, previews and deletes a cluster's Instance objects.
func TestInstancesKubeconfig(t *testing.T) {
	s, res := startCluster(t)
	work := t.TempDir()
	os.WriteFile(filepath.Join(work, "motd"), []byte("welcome\n"), 0o644)
	specFile := filepath.Join(work, "web-1.yaml")
	os.WriteFile(specFile, []byte(`apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata: {name: web-1}
spec:
  files:
    - {path: /etc/motd, mode: 0600, source: {file: motd}}
  metadataServer: {addresses: [10.0.0.1]}
`), 0o644)
	kc := []string{"--kubeconfig", s.Kubeconfig, "-n", "default"}
	in := func(args ...string) (int, string, string) {
		t.Helper()
		return run(t, append(append([]string{"instances"}, args...), kc...)...)
	}
	if code, out, stderr := in("put", specFile); code != 0 || !strings.Contains(out, "stored default/web-1") {
		t.Fatalf("put: %d %s %s", code, out, stderr)
	}
	obj, err := res.Get(context.Background(), "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	files, _, _ := unstructured.NestedSlice(obj.Object, "spec", "files")
	if f := files[0].(map[string]any); f["contentBase64"] != "d2VsY29tZQo=" || f["mode"] != "0600" || f["source"] != nil {
		t.Errorf("stored file: %v", f)
	}
	if code, out, _ := in("list"); code != 0 || !strings.Contains(out, "web-1") || !strings.Contains(out, "10.0.0.1") {
		t.Errorf("list: %d\n%s", code, out)
	}
	if code, out, _ := in("get", "web-1"); code != 0 || !strings.Contains(out, "instanceID:") {
		t.Errorf("get: %d\n%s", code, out)
	}
	if code, out, _ := in("preview", "web-1", "--dialect", "nocloud"); code != 0 || !strings.Contains(out, "==> user-data <==") || !strings.Contains(out, "/etc/motd") {
		t.Errorf("preview: %d\n%s", code, out)
	}
	// First boots: those the servers wrote into the Instances' status;
	// no server has fed web-1.
	if code, out, stderr := in("status"); code != 0 || !strings.Contains(out, "default/web-1  cloud-init  pending") || !strings.HasSuffix(out, "\n1 pending\n") {
		t.Errorf("status: %d\n%s%s", code, out, stderr)
	}
	// A server wrote web-1's failure into its status: status reads it
	// (before it answers), and --wait ends on it.
	obj, err = res.Get(context.Background(), "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unstructured.SetNestedMap(obj.Object, map[string]any{
		"state": "failed", "agent": "cloud-init", "stage": "modules-final", "module": "config-scripts-user",
		"firstFetch": "2026-11-26T12:00:00Z", "lastEvent": "2026-11-26T12:01:30Z", "finished": "2026-11-26T12:01:30Z",
		"errors": []any{map[string]any{"stage": "modules-final", "module": "config-scripts-user", "message": "exit status 2"}},
	}, "status", "firstBoot")
	if _, err := res.UpdateStatus(context.Background(), obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := in("status"); code != 0 || !strings.Contains(out, "default/web-1  cloud-init  failed  modules-final/config-scripts-user  1m30s    modules-final/config-scripts-user: exit status 2\n") {
		t.Errorf("status after a failure: %d\n%s%s", code, out, stderr)
	}
	if code, _, stderr := in("status", "web-1", "--wait", "--timeout", "20s"); code != ExitInvalid || stderr != "default/web-1: first boot failed: modules-final/config-scripts-user: exit status 2\n" {
		t.Errorf("--wait on a failure: %d %s", code, stderr)
	}
	// A spec refused on its content: exit 1, every problem named.
	bad := filepath.Join(work, "bad.yaml")
	os.WriteFile(bad, []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: bad}\nspec: {metadataServer: {addresses: [10.0.0.1]}}\n"), 0o644)
	if code, _, stderr := in("put", bad); code != ExitInvalid || !strings.Contains(stderr, "10.0.0.1") {
		t.Errorf("put of a taken address: %d %s", code, stderr)
	}
	if code, out, _ := in("delete", "web-1"); code != 0 || !strings.Contains(out, "deleted web-1") {
		t.Errorf("delete: %d %s", code, out)
	}
	if _, err := res.Get(context.Background(), "web-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after delete: %v", err)
	}
	if code, _, stderr := run(t, "instances", "list", "--kubeconfig", s.Kubeconfig, "--token-file", "x"); code != ExitUsage {
		t.Errorf("--token-file with --kubeconfig: %d %s", code, stderr)
	}
}

// TestSpecAddressesFlag: a malformed --spec-addresses or
// --max-spec-addresses is a usage error naming the flag, before any
// cluster is contacted; --spec-addresses is for --kubernetes.
func TestSpecAddressesFlag(t *testing.T) {
	for want, args := range map[string][]string{
		"want NAMESPACE=CIDR":                   {"serve", "--kubernetes", "--spec-addresses", "tenant-a"},
		`--spec-addresses "tenant-a=10.0.0.1"`:  {"serve", "--kubernetes", "--spec-addresses", "tenant-a=10.0.0.1"},
		"--max-spec-addresses=0: want 1":        {"serve", "--kubernetes", "--max-spec-addresses", "0"},
		"--spec-addresses are for --kubernetes": {"serve", "--instances", t.TempDir(), "--spec-addresses", "a=10.0.0.0/8"},
	} {
		code, _, stderr := run(t, args...)
		if code != ExitUsage || !strings.Contains(stderr, want) {
			t.Errorf("%v: exit %d, want %q in\n%s", args, code, want, stderr)
		}
	}
}

// TestControllerMoved: `vminit controller`, from before the controller was
// a binary of its own, is a usage error that names vminit-controller,
// whatever flags it is given.
func TestControllerMoved(t *testing.T) {
	code, _, stderr := run(t, "controller", "--kubeconfig", filepath.Join(t.TempDir(), "none"), "--patch-vms")
	if code != ExitUsage || !strings.Contains(stderr, "run vminit-controller with the same flags") {
		t.Errorf("exit %d:\n%s", code, stderr)
	}
}
