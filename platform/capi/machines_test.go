package capi_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/platformtest"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/capi"
	"github.com/vminit/vminit/spec"
)

// kcp is a v1beta2 KubeadmControlPlane of 3 machines with init and join
// configurations, as published cluster templates write them.
const kcp = `apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlane
metadata:
  name: cp
spec:
  replicas: 3
  version: v1.31.2
  machineTemplate:
    spec:
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachineTemplate, name: cp}
  kubeadmConfigSpec:
    clusterConfiguration:
      apiServer:
        certSANs: [localhost]
    initConfiguration:
      nodeRegistration: {name: init-node}
    joinConfiguration:
      nodeRegistration: {name: join-node}
`

// discovery is what CABPK fills in from the Cluster, as the flags give it.
var discovery = platform.Options{BootstrapToken: "abcdef.0123456789abcdef", ControlPlaneEndpoint: "192.0.2.10:6443",
	CACertHashes: []string{"sha256:" + strings.Repeat("0f", 32)}}

func with(o platform.Options, f func(*platform.Options)) platform.Options {
	f(&o)
	return o
}

// TestControlPlaneKinds: a KubeadmControlPlane(Template)'s kubeadmConfigSpec
// is read, every served version; its first machine (--pool-index 0) inits
// with the KCP's Kubernetes version, the others join the control plane.
func TestControlPlaneKinds(t *testing.T) {
	files := func(s *spec.Spec) map[string]string { return fileMap(s) }
	platformtest.Run(t, []platformtest.Case{
		{Name: "the first machine inits, with spec.version", Doc: kcp, Opts: with(discovery, func(o *platform.Options) { o.Machine = "cp-x7k2p" }),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				cfg := files(s)[capi.InitConfigPath]
				for _, want := range []string{"kind: InitConfiguration", "name: init-node", "kubernetesVersion: v1.31.2", "certSANs:"} {
					if !strings.Contains(cfg, want) {
						t.Errorf("init config lacks %q:\n%s", want, cfg)
					}
				}
				if strings.Contains(cfg, "join-node") {
					t.Errorf("the first machine's config has the join configuration:\n%s", cfg)
				}
				platformtest.Eq(t, "command", s.Commands[0].Shell, "kubeadm init --config "+capi.InitConfigPath+" && echo success > "+capi.SentinelFile)
				platformtest.Eq(t, "object", r.Object, "Cluster API KubeadmControlPlane default/cp")
			}},
		{Name: "the others join the control plane", Doc: kcp, Opts: with(discovery, func(o *platform.Options) { o.Machine = "cp-9fz1q"; o.PoolIndex = 2 }),
			Warns: []string{"spec.kubeadmConfigSpec.files: a joining control-plane machine needs the cluster's certificate authorities"},
			Check: func(t *testing.T, s *spec.Spec, _ *platform.Result) {
				f := files(s)
				if _, ok := f[capi.InitConfigPath]; ok {
					t.Error("a joining machine has the init configuration")
				}
				cfg := f[capi.JoinConfigPath]
				for _, want := range []string{"kind: JoinConfiguration", "controlPlane: {}", "name: join-node", "token: abcdef.0123456789abcdef", "apiServerEndpoint: 192.0.2.10:6443", "sha256:0f0f"} {
					if !strings.Contains(cfg, want) {
						t.Errorf("join config lacks %q:\n%s", want, cfg)
					}
				}
				platformtest.Eq(t, "command", s.Commands[0].Shell, "kubeadm join --config "+capi.JoinConfigPath+" && echo success > "+capi.SentinelFile)
			}},
		{Name: "no such machine", Doc: kcp, Opts: with(discovery, func(o *platform.Options) { o.Machine = "cp-a"; o.PoolIndex = 3 }),
			Errs: []string{`vm.yaml:6: spec.replicas: KubeadmControlPlane "cp" has 3 machines, which KCP numbers from 0; there is no machine 3 (--pool-index)`}},
		{Name: "v1beta1 template", Doc: "apiVersion: controlplane.cluster.x-k8s.io/v1beta1\nkind: KubeadmControlPlaneTemplate\nmetadata: {name: cpt}\nspec:\n  template:\n    spec:\n      kubeadmConfigSpec:\n        initConfiguration:\n          nodeRegistration:\n            kubeletExtraArgs: {cloud-provider: external}\n        files: [{path: /etc/a, content: x, permissions: \"9\"}]\n",
			Errs: []string{`vm.yaml:11: spec.template.spec.kubeadmConfigSpec.files[0].permissions: "9": want an octal mode`}},
		{Name: "v1beta1 template, the first machine", Doc: "apiVersion: controlplane.cluster.x-k8s.io/v1beta1\nkind: KubeadmControlPlaneTemplate\nmetadata: {name: cpt}\nspec:\n  template:\n    spec:\n      kubeadmConfigSpec:\n        initConfiguration:\n          nodeRegistration:\n            kubeletExtraArgs: {cloud-provider: external}\n",
			Warns: []string{`vm.yaml:3: metadata.name: every machine built from this template without --machine gets the host name and instance id "cpt"`},
			Check: func(t *testing.T, s *spec.Spec, _ *platform.Result) {
				if cfg := files(s)[capi.InitConfigPath]; !strings.Contains(cfg, "name: cloud-provider") || !strings.Contains(cfg, "kubernetesVersion: "+capi.DefaultKubernetesVersion) {
					t.Errorf("init config:\n%s", cfg)
				}
			}},
		{Name: "unknown field", Doc: strings.Replace(kcp, "  replicas: 3\n", "  replica: 3\n", 1), Errs: []string{"vm.yaml:6: spec.replica: unknown field"}},
	})
	for _, c := range []struct {
		apiVersion, kind string
		want             bool
	}{
		{"controlplane.cluster.x-k8s.io/v1beta2", "KubeadmControlPlane", true},
		{"controlplane.cluster.x-k8s.io/v1beta1", "KubeadmControlPlaneTemplate", true},
		{"controlplane.cluster.x-k8s.io/v1beta2", "KubeadmConfig", false},
		{"bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmControlPlane", false},
	} {
		if got := capi.Recognizes(c.apiVersion, c.kind); got != c.want {
			t.Errorf("Recognizes(%s, %s) = %v", c.apiVersion, c.kind, got)
		}
	}
}

// kct is a KubeadmConfigTemplate md-0 with spec fields (indented as the
// template's spec's).
func kct(fields string) string {
	return "apiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: KubeadmConfigTemplate\nmetadata:\n  name: md-0\nspec:\n  template:\n    spec:\n" + platformtest.Indent(fields, 6)
}

// TestJoin: as CABPK decides, a template's machines always join; an empty
// KubeadmConfig joins; a join's discovery is CABPK's default,
// bootstrap-token, from the flags where the object has none, and an error
// saying what CABPK does when neither gives it.
func TestJoin(t *testing.T) {
	m := with(discovery, func(o *platform.Options) { o.Machine = "md-0-abcde" })
	joins := func(t *testing.T, s *spec.Spec, _ *platform.Result) {
		cfg := fileMap(s)[capi.JoinConfigPath]
		if !strings.Contains(cfg, "kind: JoinConfiguration") || !strings.Contains(cfg, "token: abcdef.0123456789abcdef") {
			t.Errorf("join config:\n%s", cfg)
		}
		if _, ok := fileMap(s)[capi.InitConfigPath]; ok {
			t.Error("init configuration written")
		}
	}
	platformtest.Run(t, []platformtest.Case{
		{Name: "a template's machines join, its init configuration ignored", Doc: kct("initConfiguration: {nodeRegistration: {name: a}}\njoinConfiguration: {nodeRegistration: {name: b}}\n"), Opts: m,
			Warns: []string{"vm.yaml:8: spec.template.spec.initConfiguration: ignored: the machines of a KubeadmConfigTemplate (a MachineDeployment's or MachinePool's) always join"},
			Check: joins},
		{Name: "an empty KubeadmConfig of a worker joins", Doc: "apiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: KubeadmConfig\nmetadata: {name: w}\n", Opts: with(discovery, worker), Check: joins},
		{Name: "an empty KubeadmConfig of no role is refused", Doc: "apiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: KubeadmConfig\nmetadata: {name: w}\n", Opts: discovery,
			Errs: []string{`vm.yaml:3: metadata.name: KubeadmConfig "w" is empty (no init, cluster or join configuration)`, "--kubeconfig", "--control-plane=false (a worker)"}},
		{Name: "an empty template joins", Doc: kct("{}\n"), Opts: m, Check: joins},
		{Name: "the object's discovery wins", Doc: kct("joinConfiguration:\n  discovery:\n    bootstrapToken: {token: zzzzzz.zzzzzzzzzzzzzzzz, apiServerEndpoint: \"10.0.0.1:6443\", caCertHashes: [\"sha256:aa\"]}\n"), Opts: m,
			Check: func(t *testing.T, s *spec.Spec, _ *platform.Result) {
				cfg := fileMap(s)[capi.JoinConfigPath]
				if !strings.Contains(cfg, "token: zzzzzz") || !strings.Contains(cfg, "10.0.0.1:6443") || strings.Contains(cfg, "0f0f") {
					t.Errorf("join config:\n%s", cfg)
				}
			}},
		{Name: "a discovery file is kept", Doc: kct("joinConfiguration:\n  discovery:\n    file: {kubeConfigPath: /etc/kubernetes/discovery.conf}\n"), Opts: platform.Options{Machine: "md-0-a"},
			Check: func(t *testing.T, s *spec.Spec, _ *platform.Result) {
				if cfg := fileMap(s)[capi.JoinConfigPath]; !strings.Contains(cfg, "kubeConfigPath: /etc/kubernetes/discovery.conf") || strings.Contains(cfg, "bootstrapToken") {
					t.Errorf("join config:\n%s", cfg)
				}
			}},
		{Name: "no discovery", Doc: kct("joinConfiguration: {nodeRegistration: {name: b}}\n"), Opts: platform.Options{Machine: "md-0-a"},
			Errs: []string{"vm.yaml:8: spec.template.spec.joinConfiguration.discovery: the machine of KubeadmConfigTemplate \"md-0\" joins its cluster, and kubeadm join has no bootstrapToken.apiServerEndpoint (--control-plane-endpoint HOST:PORT) and no bootstrapToken.token (--bootstrap-token) to find it with: CABPK fills bootstrap-token discovery itself from the Cluster"}},
		{Name: "no CA hash", Doc: kct("{}\n"), Opts: platform.Options{Machine: "md-0-a", BootstrapToken: "abcdef.0123456789abcdef", ControlPlaneEndpoint: "192.0.2.10:6443"},
			Warns: []string{"spec.template.spec.joinConfiguration.discovery.bootstrapToken: no caCertHashes (--ca-cert-hash sha256:HEX): unsafeSkipCAVerification, as CABPK sets it"},
			Check: func(t *testing.T, s *spec.Spec, _ *platform.Result) {
				if cfg := fileMap(s)[capi.JoinConfigPath]; !strings.Contains(cfg, "unsafeSkipCAVerification: true") {
					t.Errorf("join config:\n%s", cfg)
				}
			}},
		{Name: "a bad token", Doc: kct("{}\n"), Opts: with(m, func(o *platform.Options) { o.BootstrapToken = "secret" }),
			Errs: []string{`spec.template.spec.joinConfiguration.discovery.bootstrapToken.token: --bootstrap-token "secret": want kubeadm's token format`}},
	})
}

// TestMachine: --machine names the machine a template is built for, so
// two machines never share a host name or instance id; without it the
// machine is named after the template, with a warning.
func TestMachine(t *testing.T) {
	doc := kct("joinConfiguration: {nodeRegistration: {name: b}}\n")
	build := func(machine string) *platform.Result {
		r, err := platformtest.Convert(t, doc, with(discovery, func(o *platform.Options) { o.Machine = machine }))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := build("md-0-7h2kq"), build("md-0-x91zc")
	if len(a.Warnings)+len(b.Warnings) > 0 {
		t.Errorf("warnings: %q %q", a.Warnings, b.Warnings)
	}
	for _, r := range []*platform.Result{a, b} {
		if s := &r.Instance.Spec; s.Hostname != r.Instance.Metadata.Name {
			t.Errorf("host name %q for machine %q", s.Hostname, r.Instance.Metadata.Name)
		}
	}
	platformtest.Eq(t, "host name", a.Instance.Spec.Hostname, "md-0-7h2kq")
	if a.Instance.Spec.InstanceID == b.Instance.Spec.InstanceID || a.Instance.Spec.Hostname == b.Instance.Spec.Hostname {
		t.Errorf("two machines share an identity: %q %q, %q %q", a.Instance.Spec.Hostname, a.Instance.Spec.InstanceID, b.Instance.Spec.Hostname, b.Instance.Spec.InstanceID)
	}
	platformtest.Run(t, []platformtest.Case{
		{Name: "without --machine", Doc: doc, Opts: discovery,
			Warns: []string{`vm.yaml:4: metadata.name: every machine built from this template without --machine gets the host name and instance id "md-0": Cluster API names each of its machines; give --machine NAME for each`},
			Check: func(t *testing.T, s *spec.Spec, _ *platform.Result) {
				platformtest.Eq(t, "host name", s.Hostname, "md-0")
			}},
		{Name: "a KubeadmConfig is one machine's", Doc: "apiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: KubeadmConfig\nmetadata: {name: w-config}\n", Opts: with(discovery, worker),
			Check: func(t *testing.T, s *spec.Spec, _ *platform.Result) {
				platformtest.Eq(t, "host name", s.Hostname, "w-config")
			}},
		{Name: "a machine name that is no host name", Doc: doc, Opts: with(discovery, func(o *platform.Options) { o.Machine = "MD_0" }),
			Errs: []string{`vm.yaml:4: metadata.name: --machine "MD_0": "MD_0" is not a valid name`}},
	})
}

// TestJinja: an object reading cloud-init's instance data with Jinja keeps
// CABPK's header, so cloud-init renders it; every text then must parse.
func TestJinja(t *testing.T) {
	m := with(discovery, func(o *platform.Options) { o.Machine = "md-0-abcde" })
	platformtest.Run(t, []platformtest.Case{
		{Name: "the header kept", Doc: kct("joinConfiguration:\n  nodeRegistration:\n    name: '{{ ds.meta_data.local_hostname }}'\npreKubeadmCommands: [\"echo {{ v1.instance_id }}\"]\nfiles: [{path: /etc/a, content: \"{{ local_hostname }}\"}]\nusers: [{name: capv, sudo: \"ALL=(ALL) NOPASSWD:ALL\", sshAuthorizedKeys: [\"" + keyA + "\"]}]\nntp: {servers: [pool.ntp.org]}\n"), Opts: m,
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				ud := s.CloudInit.UserData
				if !strings.HasPrefix(ud, capi.JinjaHeader+"#cloud-config\n") || !s.CloudInit.UserDataOnly {
					t.Errorf("user data (only %v):\n%s", s.CloudInit.UserDataOnly, ud)
				}
				for _, want := range []string{"name: '{{ ds.meta_data.local_hostname }}'", "echo {{ v1.instance_id }}", "{{ local_hostname }}", "kubeadm join", "name: capv", "pool.ntp.org"} {
					if !strings.Contains(ud, want) {
						t.Errorf("user data lacks %q:\n%s", want, ud)
					}
				}
				if !strings.Contains(string(r.Spec), "## template: jinja") {
					t.Errorf("the spec lacks the header:\n%s", r.Spec)
				}
			}},
		{Name: "other braces stay literal", Doc: kct("joinConfiguration: {nodeRegistration: {name: b}}\nfiles: [{path: /etc/helm.tpl, content: \"{{ .Values.region }} {{ x.platform }}\"}]\n"), Opts: m,
			Check: func(t *testing.T, s *spec.Spec, _ *platform.Result) {
				if s.CloudInit.UserDataOnly || strings.Contains(s.CloudInit.UserData, "jinja") {
					t.Errorf("a header without instance data:\n%s", s.CloudInit.UserData)
				}
			}},
		{Name: "a template that does not parse", Doc: kct("joinConfiguration:\n  nodeRegistration:\n    name: '{{ local_hostname }}'\nfiles:\n- path: /etc/helm.tpl\n  content: |\n    a: 1\n    b: {{ .Values.x }}\npostKubeadmCommands: [\"{% if v1.region %}echo x\"]\n"), Opts: m,
			Errs: []string{`vm.yaml:15: spec.template.spec.files[0].content: column 14: {{ .Values.x }}: "." cannot start a Jinja expression: KubeadmConfigTemplate "md-0" reads cloud-init's instance data with Jinja`,
				"vm.yaml:16: spec.template.spec.postKubeadmCommands[0]: line 1, column 1 of its text: {% if %} is never closed by {% endif %}"}},
		{Name: "Ignition has no Jinja", Doc: kct("format: ignition\njoinConfiguration: {nodeRegistration: {name: '{{ local_hostname }}'}}\n"), Opts: m,
			Check: func(t *testing.T, s *spec.Spec, _ *platform.Result) {
				if s.CloudInit.UserDataOnly {
					t.Error("Ignition with user data")
				}
			}},
	})
}

// TestJinjaWholeTemplate: with CABPK's header the whole user data is one
// template: a Secret's content cloud-init's Jinja cannot parse is refused
// (the user data's line named), and an encoded file whose text holds
// Jinja markers, which CABPK keeps encoded, is refused naming its field.
func TestJinjaWholeTemplate(t *testing.T) {
	m := with(discovery, func(o *platform.Options) { o.Machine = "md-0-abcde" })
	named := "joinConfiguration:\n  nodeRegistration:\n    name: '{{ local_hostname }}'\n"
	platformtest.Run(t, []platformtest.Case{
		{Name: "a Secret's text", Doc: strings.Replace(kct(named+"files: [{path: /etc/a, contentFrom: {secret: {name: s, key: k}}}]\n"), "metadata:\n  name: md-0\n", "metadata:\n  name: md-0\n  namespace: ns\n", 1) + "---\n" + secret("s", "k", "x: {% if %}\n"), Opts: m,
			Errs: []string{`vm.yaml:8: spec.template.spec: the user data, one Jinja template since KubeadmConfigTemplate "md-0" reads cloud-init's instance data, does not parse at its line`}},
		{Name: "an encoded file", Doc: kct(named + "files: [{path: /etc/helm.tpl, encoding: base64, content: " + base64.StdEncoding.EncodeToString([]byte("{{ .Values.x }}")) + "}]\n"), Opts: m,
			Errs: []string{`vm.yaml:11: spec.template.spec.files[0].content: decoded, its text holds {{, {% or {#, which cloud-init's Jinja would evaluate`}},
	})
}

// worker says, as --control-plane=false does, that an empty KubeadmConfig
// is a worker's.
func worker(o *platform.Options) {
	f := false
	o.ControlPlane = &f
}

// TestControlPlaneJoinOfAWorker: a KubeadmConfig joining the control plane
// (the Cluster API book's "additional control plane nodes" block,
// joinConfiguration.controlPlane) whose Machine is no control-plane machine
// is refused, as CABPK refuses it: its joinWorker returns "Machine is a
// Worker, but JoinConfiguration.ControlPlane is set in the KubeadmConfig
// object" (cluster-api v1.14.0,
// bootstrap/kubeadm/reconcilers/kubeadmconfig/kubeadmconfig_controller.go
// line 721), and the machine gets no bootstrap data. vminit built a
// control-plane join for it. A control-plane Machine, or none, joins the
// control plane as before.
func TestControlPlaneJoinOfAWorker(t *testing.T) {
	doc := "apiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: KubeadmConfig\nmetadata: {name: my-control-plane2-config}\nspec:\n  joinConfiguration:\n    controlPlane: {}\n"
	machine := func(cp bool) func(*platform.Options) {
		return func(o *platform.Options) {
			o.Machines = []platform.Machine{{Name: "my-machine2", Namespace: "default", Config: "my-control-plane2-config", ControlPlane: cp, Where: "machines.yaml:3"}}
		}
	}
	joinsControlPlane := func(t *testing.T, s *spec.Spec, _ *platform.Result) {
		if cfg := fileMap(s)[capi.JoinConfigPath]; !strings.Contains(cfg, "controlPlane: {}") {
			t.Errorf("join config:\n%s", cfg)
		}
	}
	certs := "spec.files: a joining control-plane machine needs the cluster's certificate authorities"
	cabpk := `CABPK gives such a machine no bootstrap data (its joinWorker: "Machine is a Worker, but JoinConfiguration.ControlPlane is set in the KubeadmConfig object")`
	platformtest.Run(t, []platformtest.Case{
		{Name: "a worker's Machine", Doc: doc, Opts: with(discovery, machine(false)),
			Errs: []string{`vm.yaml:6: spec.joinConfiguration.controlPlane: KubeadmConfig "my-control-plane2-config" joins the control plane, but its Machine my-machine2 (machines.yaml:3) is no control-plane machine (no label cluster.x-k8s.io/control-plane): ` + cabpk}},
		{Name: "--control-plane=false", Doc: doc, Opts: with(discovery, worker),
			Errs: []string{`vm.yaml:6: spec.joinConfiguration.controlPlane: KubeadmConfig "my-control-plane2-config" joins the control plane, but --control-plane=false says its machine is a worker: ` + cabpk}},
		{Name: "a control-plane Machine", Doc: doc, Opts: with(discovery, machine(true)), Warns: []string{certs}, Check: joinsControlPlane},
		{Name: "no Machine", Doc: doc, Opts: discovery, Warns: []string{certs}, Check: joinsControlPlane},
		{Name: "a cluster that cannot say", Doc: doc, Opts: with(discovery, func(o *platform.Options) {
			o.FindMachine = func(context.Context, string, string) (*platform.Machine, error) {
				return nil, errors.New("the cluster serves no Cluster API Machines")
			}
		}),
			Warns: []string{`vm.yaml:3: metadata.name: finding the Machine whose bootstrap config is KubeadmConfig "my-control-plane2-config" in the cluster: the cluster serves no Cluster API Machines: the machine is named after the object`},
			Check: joinsControlPlane},
	})
}

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
		{Name: "a cluster that cannot say, the object's join configuration decides", Doc: joins + machine(true), Opts: with(discovery, func(o *platform.Options) {
			o.FindCluster = func(context.Context, string, string) (*platform.Cluster, error) {
				return nil, errors.New("the cluster serves no Cluster API Clusters")
			}
		}), Warns: []string{"the cluster serves no Cluster API Clusters: the object's own configuration decides", certs}, Check: joinsCP},
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
