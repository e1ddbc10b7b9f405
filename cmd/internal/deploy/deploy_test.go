// Package deploy holds deployment files; this test checks they parse and
// hang together.
package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/cmd/internal/cli"
	"github.com/vminit/vminit/cmd/internal/controllercmd"
	"github.com/vminit/vminit/cmd/internal/nodecmd"
	"github.com/vminit/vminit/cmd/internal/servercmd"
)

// container is a container or init container of a workload's pod.
// envVar is a container's environment variable from the downward API.
type envVar struct {
	Name      string `yaml:"name"`
	ValueFrom struct {
		FieldRef struct {
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
	} `yaml:"valueFrom"`
}

type container struct {
	Name      string   `yaml:"name"`
	Image     string   `yaml:"image"`
	Command   []string `yaml:"command"`
	Args      []string `yaml:"args"`
	Env       []envVar `yaml:"env"`
	Lifecycle struct {
		PreStop struct {
			Sleep struct {
				Seconds int64 `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
			Add  []string `yaml:"add"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Type       string `yaml:"type"` // Secret
	Metadata   struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Selector any `yaml:"selector"` // Service: map; workloads: {matchLabels}
		Ports    []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort any    `yaml:"targetPort"`
		} `yaml:"ports"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				HostNetwork                   bool        `yaml:"hostNetwork"`
				TerminationGracePeriodSeconds *int64      `yaml:"terminationGracePeriodSeconds"`
				Containers                    []container `yaml:"containers"`
				InitContainers                []container `yaml:"initContainers"`
				Volumes                       []struct {
					Name   string `yaml:"name"`
					Secret *struct {
						SecretName string `yaml:"secretName"`
					} `yaml:"secret"`
					ConfigMap *struct {
						Name string `yaml:"name"`
					} `yaml:"configMap"`
					HostPath *struct {
						Path string `yaml:"path"`
					} `yaml:"hostPath"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// fileFlags are the serve flags, besides --*-file, that name a file.
var fileFlags = map[string]bool{
	"admin-tls-cert": true, "admin-tls-key": true, "admin-client-ca": true,
	"etcd-ca": true, "etcd-cert": true, "etcd-key": true,
}

var required = map[string]string{"Secret": "v1", "ConfigMap": "v1", "Service": "v1", "Deployment": "apps/v1", "DaemonSet": "apps/v1",
	"Namespace": "v1", "ServiceAccount": "v1", "Role": rbac, "ClusterRole": rbac, "RoleBinding": rbac,
	"ValidatingAdmissionPolicy": admission, "ValidatingAdmissionPolicyBinding": admission,
	"CustomResourceDefinition": "apiextensions.k8s.io/v1"}

const rbac, admission = "rbac.authorization.k8s.io/v1", "admissionregistration.k8s.io/v1"

// operatorSecrets are the Secrets a manifest mounts but cannot hold (random
// keys: kustomize makes no random bytes; certificates), which the operator
// creates with the command the manifests give.
var operatorSecrets = map[string]bool{"vminit-server-token-key": true, "vminit-server-admin-token": true, "vminit-server-admin-tls": true}

// decode reads the objects of a multi-document YAML stream (a manifest, or
// what kubectl kustomize built), each of a kind and apiVersion vminit uses
// and named.
func decode(t *testing.T, where string, data []byte) []object {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(false)
	var objs []object
	for {
		var o object
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if o.Kind == "Kustomization" || o.Kind == "Component" {
			continue
		}
		if want, ok := required[o.Kind]; !ok || o.APIVersion != want || o.Metadata.Name == "" {
			t.Errorf("%s: %s %q: unexpected kind, apiVersion %q or no name", where, o.Kind, o.Metadata.Name, o.APIVersion)
		}
		objs = append(objs, o)
	}
}

// manifests are deploy/kubernetes' YAML files, kustomizations included.
func manifests(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir("kubernetes", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") {
			files = append(files, p)
		}
		return err
	})
	if err != nil || len(files) < 5 {
		t.Fatalf("manifests: %v %v", files, err)
	}
	return files
}

// TestManifests reads every file of deploy/kubernetes as YAML (what needs
// no tool; TestShapes checks what kubectl kustomize builds of them): the
// objects are of the kinds vminit uses, and no image is pinned to a tag
// that moves, nor named other than "vminit", the name each entry's
// images: replaces.
func TestManifests(t *testing.T) {
	for _, f := range manifests(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range decode(t, f, data) {
			ps := o.Spec.Template.Spec
			for _, c := range append(ps.Containers, ps.InitContainers...) {
				if c.Image != "vminit" {
					t.Errorf("%s: container %s runs %q, want \"vminit\" (which the kustomization's images: sets)", f, c.Name, c.Image)
				}
			}
		}
		if bytes.Contains(data, []byte(":latest")) {
			t.Errorf("%s names a :latest image", f)
		}
	}
}

// checkShape checks the objects kubectl kustomize built for one shape:
// every container runs image and is hardened, parses as the program it
// runs, has the files its flags name mounted, and stops within its grace
// period; every Secret it mounts is in the build or one the operator is
// told how to create; every Service selects pods of the build, on ports
// they name; an admin API beyond loopback speaks TLS; the node agents are
// on the host network with their node's name, in a namespace of their own.
func checkShape(t *testing.T, shape string, objs []object, image string) {
	t.Helper()
	byKind := map[string]map[string]object{}
	for _, o := range objs {
		if byKind[o.Kind] == nil {
			byKind[o.Kind] = map[string]object{}
		}
		byKind[o.Kind][o.Metadata.Name] = o
	}
	told := manifestText(t)
	for _, o := range objs {
		where := shape + ": " + o.Kind + " " + o.Metadata.Name
		switch o.Kind {
		case "Deployment", "DaemonSet":
			sel, _ := o.Spec.Selector.(map[string]any)["matchLabels"].(map[string]any)
			if len(sel) == 0 {
				t.Errorf("%s has no selector.matchLabels", where)
			}
			for k, v := range sel {
				if o.Spec.Template.Metadata.Labels[k] != v {
					t.Errorf("%s: selector %s=%v does not match the pod labels", where, k, v)
				}
			}
			ps := o.Spec.Template.Spec
			if len(ps.Containers) == 0 {
				t.Fatalf("%s has no containers", where)
			}
			vols := map[string]bool{}
			for _, v := range ps.Volumes {
				vols[v.Name] = true
				switch {
				case v.Secret == nil:
				case operatorSecrets[v.Secret.SecretName]:
					if !regexp.MustCompile(`create secret (generic|tls) ` + v.Secret.SecretName + ` `).Match(told) {
						t.Errorf("%s: volume %s names Secret %q, and no manifest says how to create it", where, v.Name, v.Secret.SecretName)
					}
				case byKind["Secret"][v.Secret.SecretName].Kind == "":
					t.Errorf("%s: volume %s names Secret %q, not in the build", where, v.Name, v.Secret.SecretName)
				}
				if v.ConfigMap != nil && byKind["ConfigMap"][v.ConfigMap.Name].Kind == "" {
					t.Errorf("%s: volume %s names ConfigMap %q, not in the build", where, v.Name, v.ConfigMap.Name)
				}
			}
			for _, c := range append(ps.Containers, ps.InitContainers...) {
				if c.Image != image {
					t.Errorf("%s: container %s runs %q, want %q", where, c.Name, c.Image, image)
				}
			}
			for _, c := range ps.Containers {
				checkContainer(t, where, ps.TerminationGracePeriodSeconds, c, vols)
			}
			node := slices.ContainsFunc(ps.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--node=") })
			if o.Kind == "DaemonSet" != node {
				t.Errorf("%s: a DaemonSet runs the node agents (--node), and only it", where)
			}
			if node {
				checkNodeAgent(t, where, o, byKind["Namespace"][o.Metadata.Namespace])
			} else if ns := byKind["Namespace"][o.Metadata.Namespace]; ns.Metadata.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
				t.Errorf("%s: in namespace %q, whose pod security is not restricted (%v)", where, o.Metadata.Namespace, ns.Metadata.Labels)
			}
		case "Service":
			checkService(t, where, o, objs)
		case "Secret":
			want := []string{"admin-token", "hmac-key"}
			if o.Type == "kubernetes.io/tls" {
				want = []string{"tls.crt", "tls.key"}
			}
			for _, k := range want {
				if o.StringData[k] == "" {
					t.Errorf("%s lacks %s", where, k)
				}
			}
		}
	}
}

// manifestText is every file of deploy/kubernetes, where the commands
// that create the operator's Secrets are written.
func manifestText(t *testing.T) []byte {
	t.Helper()
	var all []byte
	for _, f := range manifests(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, data...)
	}
	return all
}

// checkContainer: hardened, a command line of the program it runs, every
// file a flag names mounted, the grace period longer than a shutdown, and
// an admin API beyond loopback over TLS, on the port named admin.
func checkContainer(t *testing.T, where string, grace *int64, c container, vols map[string]bool) {
	t.Helper()
	where += ": container " + c.Name
	if len(c.Args) == 0 {
		t.Errorf("%s: no args", where)
	}
	sc := c.SecurityContext
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || !sc.ReadOnlyRootFilesystem || len(sc.Capabilities.Drop) == 0 {
		t.Errorf("%s is not hardened: %+v", where, sc)
	}
	for _, m := range c.VolumeMounts {
		if !vols[m.Name] {
			t.Errorf("%s: mount %s has no volume", where, m.Name)
		}
	}
	flags := commandFlags(t, where, append(c.Command, c.Args...))
	if flags == nil {
		return
	}
	shutdown, _ := flags.GetDuration("shutdown-timeout")
	g := 30 * time.Second // Kubernetes' default
	if grace != nil {
		g = time.Duration(*grace) * time.Second
	}
	// --shutdown-timeout twice: the requests in flight, then the last
	// first-boot statuses while the store refuses them.
	if pre := c.Lifecycle.PreStop.Sleep.Seconds; g <= time.Duration(pre)*time.Second+2*shutdown {
		t.Errorf("%s: terminationGracePeriodSeconds %v is not longer than the preStop sleep (%ds) and twice --shutdown-timeout (%v)", where, g, pre, shutdown)
	}
	// Every file a flag names must be mounted.
	flags.Visit(func(f *pflag.Flag) {
		if !strings.HasSuffix(f.Name, "-file") && !fileFlags[f.Name] {
			return
		}
		p := f.Value.String()
		if !slices.ContainsFunc(c.VolumeMounts, func(m struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		}) bool {
			return strings.HasPrefix(p, m.MountPath+"/")
		}) {
			t.Errorf("%s: --%s=%s, which no volume provides", where, f.Name, p)
		}
	})
	// The bearer token and specs never cross a network in clear; kubectl
	// port-forward reaches the admin API by the port named admin.
	admin, _ := flags.GetString("admin-listen")
	if admin == "" {
		return
	}
	host, port, _ := net.SplitHostPort(admin)
	if cert, _ := flags.GetString("admin-tls-cert"); !strings.HasPrefix(host, "127.") && cert == "" {
		t.Errorf("%s serves the admin API on %s without --admin-tls-cert", where, admin)
	}
	if !slices.ContainsFunc(c.Ports, func(p struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	}) bool {
		return p.Name == "admin" && strconv.Itoa(p.ContainerPort) == port
	}) {
		t.Errorf("%s: --admin-listen=%s, and no container port named admin is %s: %+v", where, admin, port, c.Ports)
	}
}

// checkService: the Service selects the pods of a workload of the build,
// and each of its ports targets a port those pods name.
func checkService(t *testing.T, where string, svc object, objs []object) {
	t.Helper()
	sel, _ := svc.Spec.Selector.(map[string]any)
	var pods []object
	for _, o := range objs {
		if o.Kind != "Deployment" && o.Kind != "DaemonSet" || o.Metadata.Namespace != svc.Metadata.Namespace {
			continue
		}
		ok := len(sel) > 0
		for k, v := range sel {
			ok = ok && o.Spec.Template.Metadata.Labels[k] == v
		}
		if ok {
			pods = append(pods, o)
		}
	}
	if len(pods) == 0 {
		t.Errorf("%s selects no pods of the build", where)
	}
	for _, p := range svc.Spec.Ports {
		name, ok := p.TargetPort.(string)
		if !ok || p.Name == "" {
			t.Errorf("%s: port %d: want a name, and a targetPort naming a container port (got %v)", where, p.Port, p.TargetPort)
			continue
		}
		for _, w := range pods {
			named := false
			for _, c := range w.Spec.Template.Spec.Containers {
				for _, cp := range c.Ports {
					named = named || cp.Name == name
				}
			}
			if !named {
				t.Errorf("%s: port %s targets %q, which the pods of %s do not name", where, p.Name, name, w.Metadata.Name)
			}
		}
	}
}

// checkNodeAgent: on the host network, its node's name from the downward
// API, NET_ADMIN for the interception, in a namespace of its own whose pod
// security admits that (vminit-system stays restricted).
func checkNodeAgent(t *testing.T, where string, ds object, ns object) {
	t.Helper()
	ps := ds.Spec.Template.Spec
	c := ps.Containers[0]
	if !ps.HostNetwork {
		t.Errorf("%s: not on the host network", where)
	}
	if !slices.Contains(c.Args, "--node=$(NODE_NAME)") || !slices.ContainsFunc(c.Env, func(e envVar) bool {
		return e.Name == "NODE_NAME" && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
	}) {
		t.Errorf("%s: want --node=$(NODE_NAME), NODE_NAME from spec.nodeName: args %v, env %+v", where, c.Args, c.Env)
	}
	if !slices.Equal(c.Command, []string{"vminit-node"}) {
		t.Errorf("%s: runs %v, want vminit-node (serve and the interception)", where, c.Command)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.ValueFrom.FieldRef.FieldPath
	}
	flags := commandFlags(t, where, append(c.Command, c.Args...))
	if flags == nil {
		return
	}
	// The agent listens on the node's address, the redirect's target.
	listen, _ := flags.GetStringArray("listen")
	agent, err := flags.GetStringArray("agent-address")
	if err != nil || len(listen) == 0 || !strings.HasPrefix(listen[0], "$(NODE_IP):") || env["NODE_IP"] != "status.hostIP" || len(agent) != 0 {
		t.Errorf("%s: want --listen=$(NODE_IP):PORT first, NODE_IP from status.hostIP, the agent address its default: --listen %v, --agent-address %q (%v), env %v", where, listen, agent, err, env)
	}
	if mode, _ := flags.GetString("intercept"); mode == "cni" {
		// Each CNI directory flag names a mount of the node's directory.
		for flag, host := range map[string]string{"cni-conf-dir": "/etc/cni/net.d", "cni-bin-dir": "/opt/cni/bin"} {
			dir, _ := flags.GetString(flag)
			ok := false
			for _, m := range c.VolumeMounts {
				for _, v := range ps.Volumes {
					ok = ok || m.MountPath == dir && v.Name == m.Name && v.HostPath != nil && v.HostPath.Path == host
				}
			}
			if !ok {
				t.Errorf("%s: --%s=%s is not a mount of the node's %s", where, flag, dir, host)
			}
		}
	} else if mode != "host" {
		t.Errorf("%s: --intercept=%s, want host or cni", where, mode)
	}
	if !slices.Contains(c.SecurityContext.Capabilities.Add, "NET_ADMIN") {
		t.Errorf("%s: no NET_ADMIN: %v", where, c.SecurityContext.Capabilities)
	}
	if ds.Metadata.Namespace == "vminit-system" || ns.Metadata.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Errorf("%s: in namespace %q (labels %v), want one of its own that is privileged", where, ds.Metadata.Namespace, ns.Metadata.Labels)
	}
}

// TestSystemdUnit checks the unit's sections and hardening directives.
func TestSystemdUnit(t *testing.T) {
	f, err := os.Open("systemd/vminit-serve.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	cont, last := false, ""
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		wasCont := cont
		cont = strings.HasSuffix(line, "\\")
		line = strings.TrimSpace(strings.TrimSuffix(line, "\\"))
		if wasCont {
			vs := keys[last]
			vs[len(vs)-1] += " " + line
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = strings.Trim(line, "[]")
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf("not key=value: %q", line)
		}
		last = section + "." + k
		keys[last] = append(keys[last], v)
	}
	for k, want := range map[string]string{
		"Service.DynamicUser": "yes", "Service.ProtectSystem": "strict", "Service.NoNewPrivileges": "yes",
		"Service.AmbientCapabilities": "CAP_NET_BIND_SERVICE", "Service.CapabilityBoundingSet": "CAP_NET_BIND_SERVICE",
		"Service.ReadWritePaths": "/var/lib/vminit/instances", "Install.WantedBy": "multi-user.target",
	} {
		if got := keys[k]; len(got) != 1 || got[0] != want {
			t.Errorf("%s = %v, want %q", k, got, want)
		}
	}
	e := keys["Service.ExecStart"]
	if len(e) != 1 || !strings.Contains(e[0], "vminit serve") {
		t.Fatalf("ExecStart = %v", e)
	}
	var shutdown time.Duration
	if flags := commandFlags(t, "ExecStart", strings.Fields(e[0])[1:]); flags != nil {
		shutdown, _ = flags.GetDuration("shutdown-timeout")
	}
	stop, err := time.ParseDuration(strings.Join(keys["Service.TimeoutStopSec"], ""))
	if err != nil || stop <= 2*shutdown {
		t.Errorf("TimeoutStopSec = %v (%v): systemd must wait longer than twice --shutdown-timeout %v before SIGKILL (requests, then the last first-boot statuses)", keys["Service.TimeoutStopSec"], err, shutdown)
	}
}

// commandFlags parses a command line (a container's command and args:
// vminit's arguments when it names no command) as `vminit serve`,
// vminit-server or vminit-controller does, so that a misspelt or removed
// flag fails here rather than at deployment, and returns the flags as
// they parsed (the last of a flag given twice counts), or nil.
func commandFlags(t *testing.T, where string, line []string) *pflag.FlagSet {
	t.Helper()
	programs := map[string]func() *cobra.Command{"vminit-controller": controllercmd.New, "vminit-server": servercmd.New, "vminit-node": nodecmd.New}
	var cmd *cobra.Command
	rest := line[min(1, len(line)):]
	if len(line) > 0 && programs[path.Base(line[0])] != nil {
		cmd = programs[path.Base(line[0])]()
	} else {
		var err error
		cmd, rest, err = cli.NewRootCommand().Find(line)
		if err != nil || cmd.Name() != "serve" {
			t.Errorf("%s: %v is not a serve, vminit-server, vminit-node or vminit-controller command line (%v)", where, line, err)
			return nil
		}
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Errorf("%s: %v", where, err)
	}
	return cmd.Flags()
}
