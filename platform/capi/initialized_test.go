package capi_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/platformtest"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/capi"
	"github.com/vminit/vminit/spec"
)

// TestControlPlaneInitialized: a KubeadmConfig's machine is decided as
// CABPK decides it (cluster-api v1.14.0,
// bootstrap/kubeadm/reconcilers/kubeadmconfig/kubeadmconfig_controller.go),
// by its Machine's role and its Cluster's ControlPlaneInitialized
// condition, not by the configurations the object holds: a control-plane
// machine inits a cluster not initialized (the join configuration
// ignored) and joins the control plane of an initialized one (controlPlane
// added, the init configuration ignored); a worker joins (its init
// configuration ignored). The Cluster is read from the input (one as
// written, without status, is not initialized, as CABPK reads no
// condition), the cluster, or --control-plane-initialized; an empty
// control-plane config with none of them is refused, naming the three.
// Where the state is unsaid, the object's own configurations say it. Before,
// a control-plane Machine's join configuration joined as a worker, and
// its empty config inited whatever the cluster (a second init breaks it).
func TestControlPlaneInitialized(t *testing.T) {
	const (
		empty    = "apiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: KubeadmConfig\nmetadata: {name: cp1-config}\n"
		joins    = empty + "spec:\n  joinConfiguration:\n    nodeRegistration: {name: node-a}\n"
		inits    = empty + "spec:\n  initConfiguration:\n    nodeRegistration: {name: node-a}\n"
		initJoin = inits + "  joinConfiguration:\n    nodeRegistration: {name: node-a}\n"
	)
	// machine is the Cluster API book's Machine, of the cluster my-cluster
	// (its label, as the book's), control plane or not.
	machine := func(cp bool) string {
		l := ""
		if cp {
			l = "    cluster.x-k8s.io/control-plane: \"true\"\n"
		}
		return "---\nkind: Machine\napiVersion: cluster.x-k8s.io/v1beta2\nmetadata:\n  name: cp1\n  labels:\n    cluster.x-k8s.io/cluster-name: my-cluster\n" + l +
			"spec:\n  bootstrap:\n    configRef: {apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfig, name: cp1-config}\n  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachine, name: cp1}\n"
	}
	// cluster is a Cluster named name with the status given ("" for none).
	cluster := func(apiVersion, name, status string) string {
		return "---\nkind: Cluster\napiVersion: cluster.x-k8s.io/" + apiVersion + "\nmetadata:\n  name: " + name + "\nspec:\n  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerCluster, name: " + name + "}\n" + status
	}
	const (
		initializedV1beta2 = "status:\n  conditions:\n  - {type: InfrastructureReady, status: \"True\", reason: Ready, lastTransitionTime: \"2026-11-01T00:00:00Z\"}\n  - {type: ControlPlaneInitialized, status: \"True\", reason: Initialized, lastTransitionTime: \"2026-11-01T00:00:00Z\"}\n"
		notYet             = "status:\n  conditions:\n  - {type: ControlPlaneInitialized, status: \"False\", reason: NotInitialized, lastTransitionTime: \"2026-11-01T00:00:00Z\"}\n"
		initializedV1beta1 = "status:\n  conditions:\n  - {type: ControlPlaneInitialized, status: \"True\", lastTransitionTime: \"2026-11-01T00:00:00Z\"}\n"
	)
	flag := func(v bool) func(*platform.Options) {
		return func(o *platform.Options) { o.ControlPlaneInitialized = &v }
	}
	inits1 := func(t *testing.T, s *spec.Spec, _ *platform.Result) {
		t.Helper()
		f := fileMap(s)
		if cfg, ok := f[capi.InitConfigPath]; !ok || !strings.Contains(s.Commands[0].Shell, "kubeadm init") || strings.Contains(cfg, "JoinConfiguration") {
			t.Errorf("not an init: %q\n%s", s.Commands[0].Shell, cfg)
		}
	}
	joinsCP := func(t *testing.T, s *spec.Spec, _ *platform.Result) {
		t.Helper()
		f := fileMap(s)
		cfg := f[capi.JoinConfigPath]
		if _, ok := f[capi.InitConfigPath]; ok || !strings.Contains(cfg, "controlPlane: {}") || !strings.Contains(s.Commands[0].Shell, "kubeadm join") {
			t.Errorf("not a control-plane join: %q\n%s", s.Commands[0].Shell, cfg)
		}
	}
	joinsWorker := func(t *testing.T, s *spec.Spec, _ *platform.Result) {
		t.Helper()
		f := fileMap(s)
		cfg := f[capi.JoinConfigPath]
		if _, ok := f[capi.InitConfigPath]; ok || cfg == "" || strings.Contains(cfg, "controlPlane") {
			t.Errorf("not a worker join:\n%s", cfg)
		}
	}
	note := `Machine "cp1" read for the role of its KubeadmConfig "cp1-config"`
	certs := "a joining control-plane machine needs the cluster's certificate authorities"
	platformtest.Run(t, []platformtest.Case{
		// Item 1: CABPK's joinControlplane adds controlPlane: {}.
		{Name: "a control-plane Machine's join configuration joins the control plane", Doc: joins + machine(true), Opts: discovery, Warns: []string{certs}, Check: joinsCP},
		{Name: "--control-plane's join configuration joins the control plane", Doc: joins, Opts: with(discovery, func(o *platform.Options) { cp := true; o.ControlPlane = &cp }), Warns: []string{certs}, Check: joinsCP},
		{Name: "the same, its Cluster not initialized: CABPK inits", Doc: joins + machine(true) + cluster("v1beta2", "my-cluster", notYet), Opts: discovery,
			Warns: []string{"vm.yaml:5: spec.joinConfiguration: not used: its Cluster my-cluster (vm.yaml:", "has its control plane not initialized"}, Check: inits1},
		// Item 2: an empty control-plane config needs the Cluster's state.
		{Name: "an empty control-plane config, nothing saying the state", Doc: empty + machine(true), Opts: discovery,
			Errs: []string{`vm.yaml:3: metadata.name: KubeadmConfig "cp1-config" is empty, and its Machine cp1 (vm.yaml:11: metadata.labels["cluster.x-k8s.io/control-plane"]) is a control-plane machine`, "a second kubeadm init breaks a cluster", "give its Cluster (Cluster my-cluster) in the same input", "--kubeconfig", "--control-plane-initialized=false (this machine inits the cluster) or --control-plane-initialized (it joins the control plane)"}},
		{Name: "its Cluster as written (no status): being created, it inits", Doc: empty + machine(true) + cluster("v1beta2", "my-cluster", ""), Opts: discovery,
			Warns: []string{`vm.yaml:17: kind: cluster.x-k8s.io/v1beta2 Cluster "my-cluster" read for whether its control plane is initialized (it is not)`}, Check: inits1},
		{Name: "its Cluster initialized (v1beta2): a control-plane join", Doc: empty + machine(true) + cluster("v1beta2", "my-cluster", initializedV1beta2), Opts: discovery, Warns: []string{certs}, Check: joinsCP},
		{Name: "its Cluster initialized (v1beta1's condition)", Doc: empty + machine(true) + cluster("v1beta1", "my-cluster", initializedV1beta1), Opts: discovery, Warns: []string{certs}, Check: joinsCP},
		{Name: "another Cluster says nothing", Doc: empty + machine(true) + cluster("v1beta2", "other", initializedV1beta2), Opts: discovery,
			Errs: []string{"is empty, and its Machine cp1"}},
		{Name: "--control-plane-initialized=false inits", Doc: empty + machine(true), Opts: with(discovery, flag(false)), Warns: []string{note}, Check: inits1},
		{Name: "--control-plane-initialized joins the control plane", Doc: empty + machine(true), Opts: with(discovery, flag(true)), Warns: []string{certs}, Check: joinsCP},
		{Name: "the flag contradicting the Cluster", Doc: empty + machine(true) + cluster("v1beta2", "my-cluster", ""), Opts: with(discovery, flag(true)),
			Errs: []string{"vm.yaml:3: metadata.name: --control-plane-initialized=true, but its Cluster my-cluster (vm.yaml:", "is as written, with no status: one being created, its control plane not initialized", "give one"}},
		// An init configuration: CABPK ignores it once initialized.
		{Name: "an init configuration, its Cluster initialized: a control-plane join", Doc: inits + machine(true) + cluster("v1beta2", "my-cluster", initializedV1beta2), Opts: discovery,
			Warns: []string{"vm.yaml:5: spec.initConfiguration: ignored: its Cluster my-cluster", certs}, Check: joinsCP},
		{Name: "an init configuration, the state unsaid: the object's word, init", Doc: initJoin + machine(true), Opts: discovery,
			Warns: []string{"spec.joinConfiguration: not used: the object also has an init configuration"}, Check: inits1},
		{Name: "a worker's init configuration: CABPK joins it", Doc: inits + machine(false), Opts: discovery,
			Warns: []string{`vm.yaml:5: spec.initConfiguration: ignored: its Machine cp1 (vm.yaml:12: metadata.labels["cluster.x-k8s.io/control-plane"]) is no control-plane machine`}, Check: joinsWorker},
		{Name: "a worker needs no state", Doc: empty + machine(false), Opts: discovery, Warns: []string{note}, Check: joinsWorker},
		// The cluster (--kubeconfig) asked.
		{Name: "the cluster's Cluster", Doc: empty + machine(true), Opts: with(discovery, func(o *platform.Options) {
			o.FindCluster = func(_ context.Context, ns, name string) (*platform.Cluster, error) {
				if ns != "default" || name != "my-cluster" {
					t.Errorf("FindCluster(%q, %q)", ns, name)
				}
				return &platform.Cluster{Name: name, Namespace: ns, Status: true, Initialized: true, Where: "Cluster default/my-cluster in the cluster"}, nil
			}
		}), Warns: []string{certs}, Check: joinsCP},
		{Name: "a cluster that cannot say", Doc: empty + machine(true), Opts: with(discovery, func(o *platform.Options) {
			o.FindCluster = func(context.Context, string, string) (*platform.Cluster, error) {
				return nil, errors.New("the cluster serves no Cluster API Clusters")
			}
		}), Errs: []string{`vm.yaml:3: metadata.name: reading the Cluster my-cluster of KubeadmConfig "cp1-config" from the cluster: the cluster serves no Cluster API Clusters`}},
		{Name: "a cluster that cannot say, the flag decides", Doc: empty + machine(true), Opts: with(discovery, func(o *platform.Options) {
			flag(false)(o)
			o.FindCluster = func(context.Context, string, string) (*platform.Cluster, error) {
				return nil, errors.New("the cluster serves no Cluster API Clusters")
			}
		}), Warns: []string{"the cluster serves no Cluster API Clusters: --control-plane-initialized=false decides"}, Check: inits1},
	})
}

// TestReadCluster: the condition read wherever Cluster API's versions
// keep it.
func TestReadCluster(t *testing.T) {
	for _, c := range []struct {
		json              string
		ok, status, ready bool
	}{
		{`{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Cluster","metadata":{"name":"c"}}`, true, false, false},
		{`{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Cluster","status":{"conditions":[{"type":"ControlPlaneInitialized","status":"True"}]}}`, true, true, true},
		{`{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Cluster","status":{"conditions":[{"type":"ControlPlaneInitialized","status":"Unknown"}]}}`, true, true, false},
		{`{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Cluster","status":{"deprecated":{"v1beta1":{"conditions":[{"type":"ControlPlaneInitialized","status":"True"}]}}}}`, true, true, true},
		{`{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","status":{"v1beta2":{"conditions":[{"type":"ControlPlaneInitialized","status":"True"}]}}}`, true, true, true},
		{`{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Cluster","status":{"conditions":[{"type":"Available","status":"True"}]}}`, true, true, false},
		{`{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"DockerCluster"}`, false, false, false},
	} {
		got, ok := platform.ReadCluster([]byte(c.json))
		if ok != c.ok || got.Status != c.status || got.Initialized != c.ready {
			t.Errorf("%s: %+v, %v", c.json, got, ok)
		}
	}
}
