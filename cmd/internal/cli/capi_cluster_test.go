package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/kubetest"
	"github.com/vminit/vminit/iso9660"
)

// TestCAPIMachineFromCluster: an empty KubeadmConfig's role read from
// the Machine in the cluster, as a user runs it (`vminit build
// --kubeconfig KCFG kubeadmconfig.yaml -o seed.iso`),
// against a real kube-apiserver serving Cluster API's own Machine CRD
// (platform/cluster/testdata, v1.14.0 as published) and the Cluster API
// book's Machine (its "first control plane" block, kept in
// platform/testdata/corpus/capi): the book's control-plane config
// inits, its worker's joins, and a control-plane join whose Machine is a
// worker is refused as CABPK refuses it; CAPD's e2e MachinePool (its
// CRD as published too) joins its empty config as a worker. The control
// plane's config is what its Cluster (Cluster API's Cluster CRD, the
// book's Cluster) makes of it: kubeadm init while the Cluster is as
// written, a control-plane join once its ControlPlaneInitialized condition
// is True. A cluster
// serving no Machines and a user who may not list them are errors saying
// so (where --control-plane gives the role, a warning); a Role granting list on machines (and machinepools, for a
// MachinePool's config; clusters, for a control plane's) is all the lookup needs (docs/platforms/capi.md).
func TestCAPIMachineFromCluster(t *testing.T) {
	srv := kubetest.Start(t)
	dir := t.TempDir()
	corpus := func(name string) string {
		return filepath.Join("..", "..", "..", "platform", "testdata", "corpus", "capi", name)
	}
	controlPlane := corpus("book-kubeadm-bootstrap-L106.yaml") // my-control-plane1-config, empty
	worker := corpus("book-kubeadm-bootstrap-L125.yaml")       // my-worker1-config, empty
	cpJoin := corpus("book-kubeadm-bootstrap-L114.yaml")       // my-control-plane2-config, joinConfiguration.controlPlane
	discovery := []string{"--bootstrap-token", "abcdef.0123456789abcdef", "--control-plane-endpoint", "192.0.2.10:6443"}
	// build runs the command and returns the seed's user data.
	build := func(kubeconfig, config string, flags ...string) (int, string, string) {
		t.Helper()
		out := filepath.Join(dir, "seed.iso")
		os.Remove(out)
		code, _, stderr := run(t, append([]string{"build", "--kubeconfig", kubeconfig, config, "-o", out}, flags...)...)
		data, err := os.ReadFile(out)
		if code != ExitOK {
			if err == nil {
				t.Errorf("build failed (%d) but wrote %s", code, out)
			}
			return code, "", stderr
		}
		r, err := iso9660.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		ud, err := r.ReadFile("user-data")
		if err != nil {
			t.Fatal(err)
		}
		return code, string(ud), stderr
	}
	kubectl := func(a *kubetest.Account, args ...string) {
		t.Helper()
		if out, err := a.Kubectl(t, args...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}

	// No Cluster API in the cluster: the role cannot be read there.
	code, _, stderr := build(srv.Kubeconfig, controlPlane)
	if code != ExitInvalid || !strings.Contains(stderr, `book-kubeadm-bootstrap-L106.yaml:6: metadata.name: finding the Machine whose bootstrap config is KubeadmConfig "my-control-plane1-config" in the cluster: the cluster serves no Cluster API Machines`) {
		t.Errorf("without the Machine CRD: exit %d, stderr:\n%s", code, stderr)
	}
	// There --control-plane says the role (a cluster of no Cluster API
	// cannot), with a warning, and --control-plane-initialized=false the
	// state of a cluster nothing names.
	code, _, stderr = build(srv.Kubeconfig, controlPlane, "--control-plane")
	if code != ExitInvalid || !strings.Contains(stderr, "--control-plane=true says its machine is a control-plane machine") || !strings.Contains(stderr, "--control-plane-initialized=false (this machine inits the cluster)") {
		t.Errorf("without the Machine CRD, --control-plane: exit %d, stderr:\n%s", code, stderr)
	}
	code, ud, stderr := build(srv.Kubeconfig, controlPlane, "--control-plane", "--control-plane-initialized=false")
	if code != ExitOK || !strings.Contains(ud, "kubeadm init --config") || !strings.Contains(stderr, "the cluster serves no Cluster API Machines") || !strings.Contains(stderr, "--control-plane=true decides") {
		t.Errorf("without the Machine CRD, --control-plane --control-plane-initialized=false: exit %d, stderr:\n%s", code, stderr)
	}

	for _, name := range []string{"cluster.x-k8s.io_machines.yaml", "cluster.x-k8s.io_machinepools.yaml"} {
		srv.CreateCRDs(t, []byte(mustRead(t, filepath.Join("..", "..", "..", "platform", "cluster", "testdata", name))))
	}
	// The book's Machine, as published, lacks spec.clusterName, which
	// the CRD requires: the server refuses it. Given its cluster-name
	// label's value it is applied; its worker is the same Machine without
	// the control-plane label, naming the book's worker config, and a
	// third names the book's second control plane's config.
	var machine string
	for _, d := range strings.Split(mustRead(t, corpus("book-kubeadm-bootstrap-L39.yaml")), "\n---\n") {
		if strings.HasPrefix(d, "kind: Machine\n") {
			machine = d
		}
	}
	apply := func(doc string) error {
		f := filepath.Join(dir, "machine.yaml")
		if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := srv.Kubectl(t, "apply", "-f", f)
		return err
	}
	if err := apply(machine); err == nil || !strings.Contains(err.Error(), "spec.clusterName: Required value") {
		t.Fatalf("the book's Machine as published: %v", err)
	}
	machine = strings.Replace(machine, "\nspec:\n", "\nspec:\n  clusterName: my-cluster\n", 1)
	workerOf := func(name, config string) string {
		m := strings.Replace(machine, "    cluster.x-k8s.io/control-plane: \"true\"\n", "", 1)
		m = strings.Replace(m, "name: my-control-plane1\n", "name: "+name+"\n", 1)
		return strings.Replace(m, "name: my-control-plane1-config", "name: "+config, 1)
	}
	// CAPD's e2e MachinePool (the clusterctl variables given as
	// clusterctl generate does) and its empty KubeadmConfig.
	mp := strings.Split(strings.NewReplacer("${CLUSTER_NAME}", "e2e", "${WORKER_MACHINE_COUNT}", "1", "${KUBERNETES_VERSION}", "v1.35.0").
		Replace(mustRead(t, corpus("capd-e2e-mp.yaml"))), "\n---\n")
	mpConfig := filepath.Join(dir, "mp-config.yaml")
	if err := os.WriteFile(mpConfig, []byte(mp[len(mp)-1]), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{machine, workerOf("my-worker1", "my-worker1-config"), workerOf("my-worker2", "my-control-plane2-config"), mp[1]} {
		if err := apply(m); err != nil {
			t.Fatal(err)
		}
	}

	// The control-plane Machine's config is what its Cluster's state
	// makes of it: the cluster must serve
	// Clusters and hold the Machine's; the book's, as written, is being
	// created (kubeadm init); once its ControlPlaneInitialized condition
	// is True, the machine joins the control plane.
	code, _, stderr = build(srv.Kubeconfig, controlPlane)
	if code != ExitInvalid || !strings.Contains(stderr, `book-kubeadm-bootstrap-L106.yaml:6: metadata.name: reading the Cluster my-cluster of KubeadmConfig "my-control-plane1-config" from the cluster: the cluster serves no Cluster API Clusters`) {
		t.Errorf("without the Cluster CRD: exit %d, stderr:\n%s", code, stderr)
	}
	srv.CreateCRDs(t, []byte(mustRead(t, filepath.Join("..", "..", "..", "platform", "cluster", "testdata", "cluster.x-k8s.io_clusters.yaml"))))
	code, _, stderr = build(srv.Kubeconfig, controlPlane)
	if code != ExitInvalid || !strings.Contains(stderr, `the cluster has no Cluster "my-cluster" in namespace "default"`) {
		t.Errorf("without the Cluster: exit %d, stderr:\n%s", code, stderr)
	}
	// The book's Cluster block (its DockerCluster, whose CRD the server
	// lacks, left out).
	book := strings.Split(mustRead(t, filepath.Join("..", "..", "..", "platform", "cluster", "testdata", "book-cluster.yaml")), "\n---\n")
	if err := apply(book[1]); err != nil {
		t.Fatal(err)
	}
	code, ud, stderr = build(srv.Kubeconfig, controlPlane)
	if code != ExitOK || !strings.Contains(ud, "kubeadm init --config") || strings.Contains(ud, "kubeadm join") {
		t.Errorf("the control-plane Machine's config, its Cluster being created: exit %d, stderr:\n%s\nuser data:\n%s", code, stderr, ud)
	}
	kubectl(&srv.Account, "patch", "clusters.cluster.x-k8s.io", "my-cluster", "--subresource=status", "--type=merge", "-p",
		`{"status":{"conditions":[{"type":"ControlPlaneInitialized","status":"True","reason":"Initialized","message":"","lastTransitionTime":"2026-11-29T00:00:00Z"}]}}`)
	code, ud, stderr = build(srv.Kubeconfig, controlPlane, discovery...)
	if code != ExitOK || !strings.Contains(ud, "kubeadm join --config") || !strings.Contains(ud, "controlPlane: {}") || strings.Contains(ud, "kubeadm init") {
		t.Errorf("the control-plane Machine's config, its Cluster initialized: exit %d, stderr:\n%s\nuser data:\n%s", code, stderr, ud)
	}
	if code, _, stderr := build(srv.Kubeconfig, controlPlane, "--control-plane-initialized=false"); code != ExitInvalid || !strings.Contains(stderr, "--control-plane-initialized=false, but its Cluster my-cluster (Cluster default/my-cluster in the cluster) has its control plane initialized") {
		t.Errorf("a flag contradicting the cluster's Cluster: exit %d, stderr:\n%s", code, stderr)
	}
	code, ud, stderr = build(srv.Kubeconfig, worker, discovery...)
	if code != ExitOK || !strings.Contains(ud, "kubeadm join --config") || strings.Contains(ud, "kubeadm init") || strings.Contains(ud, "controlPlane") {
		t.Errorf("the worker Machine's config: exit %d, stderr:\n%s\nuser data:\n%s", code, stderr, ud)
	}
	code, ud, stderr = build(srv.Kubeconfig, mpConfig, discovery...)
	if code != ExitOK || !strings.Contains(ud, "kubeadm join --config") {
		t.Errorf("the MachinePool's config: exit %d, stderr:\n%s\nuser data:\n%s", code, stderr, ud)
	}
	code, _, stderr = build(srv.Kubeconfig, cpJoin, discovery...)
	if code != ExitInvalid || !strings.Contains(stderr, `book-kubeadm-bootstrap-L114.yaml:9: spec.joinConfiguration.controlPlane: KubeadmConfig "my-control-plane2-config" joins the control plane, but its Machine my-worker2 (Machine default/my-worker2 in the cluster) is no control-plane machine`) ||
		!strings.Contains(stderr, "Machine is a Worker, but JoinConfiguration.ControlPlane is set") {
		t.Errorf("a worker Machine's control-plane join: exit %d, stderr:\n%s", code, stderr)
	}

	// A service account with no rights may not list the Machines, nor,
	// for a control plane's config, the Clusters, nor, for a MachinePool's
	// config, which no Machine names, the MachinePools; a Role granting
	// list on each is enough.
	sa := srv.ServiceAccount(t, "default", "builder")
	for _, step := range []struct{ config, resource, kind string }{
		{controlPlane, "machines", "Machines"},
		{controlPlane, "clusters", "Clusters"},
		{mpConfig, "machinepools", "MachinePools"},
	} {
		code, _, stderr := build(sa.Kubeconfig, step.config, discovery...)
		if want := `the kubeconfig's user may not list the ` + step.kind + ` of namespace "default" (it needs list on ` + step.resource + `.cluster.x-k8s.io there)`; code != ExitInvalid || !strings.Contains(stderr, want) {
			t.Errorf("without list on %s: exit %d, want %q, stderr:\n%s", step.resource, code, want, stderr)
		}
		kubectl(&srv.Account, "create", "role", "read-"+step.resource, "-n", "default", "--verb=list", "--resource="+step.resource+".cluster.x-k8s.io")
		kubectl(&srv.Account, "create", "rolebinding", "builder-"+step.resource, "-n", "default", "--role=read-"+step.resource, "--serviceaccount=default:builder")
	}
	if code, ud, stderr := build(sa.Kubeconfig, controlPlane, discovery...); code != ExitOK || !strings.Contains(ud, "controlPlane: {}") {
		t.Errorf("with list on machines and clusters: exit %d, stderr:\n%s", code, stderr)
	}
	if code, ud, stderr := build(sa.Kubeconfig, mpConfig, discovery...); code != ExitOK || !strings.Contains(ud, "kubeadm join --config") {
		t.Errorf("with list on machinepools: exit %d, stderr:\n%s", code, stderr)
	}
}
