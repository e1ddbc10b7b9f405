package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	"github.com/vminit/vminit/internal/testing/kubetest"
)

// TestKubeconfig builds platform objects whose Secrets live in a real
// Kubernetes API server, as a user does: kubectl apply the platform's
// example (the VM and its Secrets), kubectl get the VM back (with the
// server's metadata, managedFields and last-applied annotation), and
// vminit build it with --kubeconfig. The seed must be the bytes the same
// example builds from its own file; a deleted Secret, a forbidden read
// and a missing context are errors that say so.
//
// The CRDs are KubeVirt's VirtualMachine and Cluster API's KubeadmConfig
// with structural schemas derived from kubevirt.io/api's and
// sigs.k8s.io/cluster-api/api's Go types (kubetest.CRD), which prune and
// type-check as the platforms' generated CRDs do; like KubeVirt's, the
// template's metadata keeps unknown fields
// (x-kubernetes-preserve-unknown-fields), so the annotations survive.
func TestKubeconfig(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	srv := kubetest.Start(t)
	srv.CreateCRDs(t, bytes.Join([][]byte{
		kubetest.CRD("kubevirt.io", "v1", "VirtualMachine", "virtualmachines", &kubevirtv1.VirtualMachine{}),
		kubetest.CRD("bootstrap.cluster.x-k8s.io", "v1beta2", "KubeadmConfig", "kubeadmconfigs", &bootstrapv1.KubeadmConfig{}),
	}, []byte("---\n")))
	kubectl := func(a *kubetest.Account, args ...string) string {
		t.Helper()
		out, err := a.Kubectl(t, args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	kubectl(&srv.Account, "create", "namespace", "prod")
	dir := t.TempDir()
	build := func(args ...string) (int, []byte, string) {
		t.Helper()
		out := filepath.Join(dir, "seed.iso")
		os.Remove(out)
		code, _, stderr := run(t, append([]string{"build", "-o", out}, args...)...)
		data, _ := os.ReadFile(out)
		if code != ExitOK && data != nil {
			t.Errorf("build failed (%d) but wrote %s", code, out)
		}
		return code, data, stderr
	}
	example := func(name string) string { return filepath.Join("..", "..", "..", "platform", "testdata", name) }

	for _, c := range []struct{ example, kind, name, ns string }{
		{"kubevirt-configdrive.yaml", "virtualmachine", "web-1", "prod"},
		{"capi-kubeadmconfig.yaml", "kubeadmconfig", "md-0-abcde", "default"},
	} {
		t.Run(c.kind, func(t *testing.T) {
			kubectl(&srv.Account, "apply", "-f", example(c.example))
			got := filepath.Join(dir, c.kind+".yaml")
			if err := os.WriteFile(got, []byte(kubectl(&srv.Account, "get", c.kind, c.name, "-n", c.ns, "-o", "yaml")), 0o600); err != nil {
				t.Fatal(err)
			}
			code, want, stderr := build(example(c.example))
			if code != ExitOK {
				t.Fatalf("build from the file: %s", stderr)
			}
			code, seed, stderr := build(got, "--kubeconfig", srv.Kubeconfig)
			if code != ExitOK {
				t.Fatalf("build with --kubeconfig: %s", stderr)
			}
			if !bytes.Equal(seed, want) {
				t.Errorf("the seed built with the cluster's Secrets (%d bytes) differs from the one built with the file's (%d bytes)", len(seed), len(want))
			}
		})
	}

	t.Run("not found", func(t *testing.T) {
		kubectl(&srv.Account, "delete", "secret", "web-userdata", "-n", "prod")
		vm := filepath.Join(dir, "virtualmachine.yaml")
		code, _, stderr := build(vm, "--kubeconfig", srv.Kubeconfig)
		// The line of the reference as kubectl wrote the VM.
		data, _ := os.ReadFile(vm)
		line := 0
		for i, l := range strings.Split(string(data), "\n") {
			if strings.TrimSpace(l) == "name: web-userdata" {
				line = i + 1
			}
		}
		want := fmt.Sprintf(`virtualmachine.yaml:%d: spec.template.spec.volumes[1].cloudInitConfigDrive.secretRef.name: secret "web-userdata" not found in namespace "prod"`, line)
		if code != ExitInvalid || line == 0 || !strings.Contains(stderr, want) {
			t.Errorf("exit %d, stderr:\n%s\nwant %q", code, stderr, want)
		}
		// The files given come first: --objects supplies the Secret.
		objs := filepath.Join(dir, "objects.yaml")
		os.WriteFile(objs, []byte("apiVersion: v1\nkind: Secret\nmetadata: {name: web-userdata, namespace: prod}\nstringData: {userdata: \"#!/bin/sh\\n\"}\n"), 0o600)
		if code, _, stderr := build(vm, "--kubeconfig", srv.Kubeconfig, "--objects", objs); code != ExitOK {
			t.Errorf("--objects beside --kubeconfig: %s", stderr)
		}
	})

	t.Run("service account", func(t *testing.T) {
		// A VM naming no namespace: the kubeconfig context's (prod) is
		// where its Secret is looked up, unless -n says otherwise.
		vm := filepath.Join(dir, "vm.yaml")
		os.WriteFile(vm, []byte(`apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: sa-vm}
spec:
  template:
    spec:
      domain: {devices: {}}
      volumes:
      - name: ci
        cloudInitNoCloud: {secretRef: {name: sa-userdata}}
`), 0o600)
		kubectl(&srv.Account, "create", "secret", "generic", "sa-userdata", "-n", "prod", "--from-literal=userdata=#!/bin/sh\necho sa\n")
		sa := srv.ServiceAccount(t, "prod", "builder")
		code, _, stderr := build(vm, "--kubeconfig", sa.Kubeconfig)
		if code == ExitOK || !strings.Contains(stderr, `reading secret "sa-userdata" in namespace "prod"`) || !strings.Contains(stderr, "forbidden") {
			t.Errorf("without RBAC: exit %d, stderr:\n%s", code, stderr)
		}
		kubectl(&srv.Account, "create", "role", "read-data", "-n", "prod", "--verb=get", "--resource=secrets,configmaps")
		kubectl(&srv.Account, "create", "rolebinding", "builder-reads", "-n", "prod", "--role=read-data", "--serviceaccount=prod:builder")
		code, seed, stderr := build(vm, "--kubeconfig", sa.Kubeconfig, "--fs", "tar")
		if code != ExitOK || !bytes.Contains(seed, []byte("#!/bin/sh\necho sa\n")) {
			t.Errorf("with a Role: exit %d, stderr:\n%s", code, stderr)
		}
		code, _, stderr = build(vm, "--kubeconfig", sa.Kubeconfig, "-n", "default")
		if code != ExitInvalid || !strings.Contains(stderr, `secret "sa-userdata"`) || !strings.Contains(stderr, `namespace "default"`) {
			t.Errorf("-n default: exit %d, stderr:\n%s", code, stderr)
		}
		code, _, stderr = build(vm, "--kubeconfig", sa.Kubeconfig, "--context", "nope")
		if code != ExitUsage || !strings.Contains(stderr, "--kubeconfig") || !strings.Contains(stderr, `"nope"`) {
			t.Errorf("--context nope: exit %d, stderr:\n%s", code, stderr)
		}
	})
}
