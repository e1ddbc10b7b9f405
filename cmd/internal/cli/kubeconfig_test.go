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
			code, seed, stderr := build(got, "--kubeconfig", srv.Kubeconfig, "-n", c.ns)
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
		code, _, stderr := build(vm, "--kubeconfig", srv.Kubeconfig, "-n", "prod")
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
		if code, _, stderr := build(vm, "--kubeconfig", srv.Kubeconfig, "-n", "prod", "--objects", objs); code != ExitOK {
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

// TestReferencesOnlyInTheChosenNamespace: a platform object's
// metadata.namespace does not choose whose Secrets are read. `instances put
// vm.yaml --kubeconfig … -n tenant-a` of a VM saying kube-system read a
// kube-system Secret and stored it in a tenant-a Instance; now the object
// is refused, naming its namespace field and line, nothing is read or
// stored, and the same holds for `build` and for a Secret given in a file.
func TestReferencesOnlyInTheChosenNamespace(t *testing.T) {
	srv, _ := startCluster(t)
	srv.CreateCRDs(t, kubetest.KubeVirtCRDs)
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := srv.Kubectl(t, args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	kubectl("create", "namespace", "tenant-a")
	kubectl("create", "secret", "generic", "cluster-admin-data", "-n", "kube-system", "--from-literal=userdata=#!/bin/sh\necho kube-system-secret\n")
	dir := t.TempDir()
	vm := filepath.Join(dir, "vm.yaml")
	os.WriteFile(vm, []byte(`apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: evil
  namespace: kube-system
spec:
  template:
    spec:
      domain: {devices: {}}
      volumes:
      - name: ci
        cloudInitNoCloud: {secretRef: {name: cluster-admin-data}}
`), 0o600)
	want := `vm.yaml:5: metadata.namespace: VirtualMachine "evil" is in namespace "kube-system", not "tenant-a"`
	out := filepath.Join(dir, "seed.tar")
	for _, args := range [][]string{
		{"instances", "put", vm, "--kubeconfig", srv.Kubeconfig, "-n", "tenant-a"},
		{"build", vm, "--kubeconfig", srv.Kubeconfig, "-n", "tenant-a", "-o", out},
	} {
		code, stdout, stderr := run(t, args...)
		if code != ExitInvalid || !strings.Contains(stderr, want) || strings.Contains(stdout+stderr, "kube-system-secret") {
			t.Errorf("%s: exit %d, stdout %q, stderr:\n%s\nwant %q", args[0], code, stdout, stderr, want)
		}
	}
	if got := kubectl("get", "instances", "-n", "tenant-a", "-o", "name"); got != "" {
		t.Errorf("instances stored in tenant-a: %s", got)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("build wrote %s: %v", out, err)
	}
	// Without -n the kubeconfig context's namespace (default) is the
	// chosen one: the object still does not choose.
	if code, _, stderr := run(t, "build", vm, "--kubeconfig", srv.Kubeconfig, "-o", out); code != ExitInvalid || !strings.Contains(stderr, `is in namespace "kube-system", not "default"`) {
		t.Errorf("without -n: exit %d, stderr:\n%s", code, stderr)
	}
	// A VM naming no namespace is tenant-a's: the kube-system Secret of
	// the same name is not found there.
	os.WriteFile(vm, []byte(strings.Replace(mustRead(t, vm), "  namespace: kube-system\n", "", 1)), 0o600)
	if code, _, stderr := run(t, "build", vm, "--kubeconfig", srv.Kubeconfig, "-n", "tenant-a", "-o", out); code != ExitInvalid ||
		!strings.Contains(stderr, `secret "cluster-admin-data" not found in namespace "tenant-a"`) {
		t.Errorf("a VM naming no namespace: exit %d, stderr:\n%s", code, stderr)
	}
	// A Secret given in a file is confined the same way.
	objs := filepath.Join(dir, "objects.yaml")
	os.WriteFile(objs, []byte("apiVersion: v1\nkind: Secret\nmetadata: {name: cluster-admin-data, namespace: kube-system}\nstringData: {userdata: \"#!/bin/sh\\n\"}\n"), 0o600)
	if code, _, stderr := run(t, "build", vm, "-n", "tenant-a", "--objects", objs, "-o", out); code != ExitInvalid ||
		!strings.Contains(stderr, `objects.yaml:3: metadata.namespace: Secret "cluster-admin-data" is in namespace "kube-system", not "tenant-a"`) {
		t.Errorf("--objects in another namespace: exit %d, stderr:\n%s", code, stderr)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
