// Package deploy holds deployment files; this test checks they parse and
// hang together.
package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/app/cli"
	"github.com/vminit/vminit/internal/app/controllercmd"
	"github.com/vminit/vminit/internal/app/servercmd"
)

type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Type       string `yaml:"type"` // Secret
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Selector any `yaml:"selector"` // Service: map; workloads: {matchLabels}
		Ports    []struct {
			Name       string `yaml:"name"`
			TargetPort any    `yaml:"targetPort"`
		} `yaml:"ports"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				HostNetwork                   bool   `yaml:"hostNetwork"`
				TerminationGracePeriodSeconds *int64 `yaml:"terminationGracePeriodSeconds"`
				Containers                    []struct {
					Name      string   `yaml:"name"`
					Image     string   `yaml:"image"`
					Command   []string `yaml:"command"`
					Args      []string `yaml:"args"`
					Lifecycle struct {
						PreStop struct {
							Sleep struct {
								Seconds int64 `yaml:"seconds"`
							} `yaml:"sleep"`
						} `yaml:"preStop"`
					} `yaml:"lifecycle"`
					Ports []struct {
						Name string `yaml:"name"`
					} `yaml:"ports"`
					SecurityContext struct {
						AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
						ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
						Capabilities             struct {
							Drop []string `yaml:"drop"`
						} `yaml:"capabilities"`
					} `yaml:"securityContext"`
					VolumeMounts []struct {
						Name      string `yaml:"name"`
						MountPath string `yaml:"mountPath"`
					} `yaml:"volumeMounts"`
				} `yaml:"containers"`
				Volumes []struct {
					Name   string `yaml:"name"`
					Secret *struct {
						SecretName string `yaml:"secretName"`
					} `yaml:"secret"`
					ConfigMap *struct {
						Name string `yaml:"name"`
					} `yaml:"configMap"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// fileFlags are the serve flags, besides --*-file, that name a file.
var fileFlags = map[string]bool{
	"--admin-tls-cert": true, "--admin-tls-key": true, "--admin-client-ca": true,
	"--etcd-ca": true, "--etcd-cert": true, "--etcd-key": true,
}

var required = map[string]string{"Secret": "v1", "ConfigMap": "v1", "Service": "v1", "Deployment": "apps/v1", "DaemonSet": "apps/v1",
	"Namespace": "v1", "ServiceAccount": "v1", "Role": rbac, "ClusterRole": rbac, "RoleBinding": rbac,
	"ValidatingAdmissionPolicy": admission, "ValidatingAdmissionPolicyBinding": admission}

const rbac, admission = "rbac.authorization.k8s.io/v1", "admissionregistration.k8s.io/v1"

// operatorSecrets are the Secrets a manifest mounts but cannot hold (random
// keys: kustomize makes no random bytes), which the operator creates with
// the command the manifest gives.
var operatorSecrets = map[string]bool{"vminit-server-token-key": true}

func load(t *testing.T, path string) []object {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(false)
	var objs []object
	for {
		var o object
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if o.Kind == "Kustomization" {
			continue
		}
		if want, ok := required[o.Kind]; !ok || o.APIVersion != want || o.Metadata.Name == "" {
			t.Errorf("%s: %s %q: unexpected kind, apiVersion %q or no name", path, o.Kind, o.Metadata.Name, o.APIVersion)
		}
		objs = append(objs, o)
	}
}

func TestManifests(t *testing.T) {
	files, _ := filepath.Glob("kubernetes/*.yaml")
	if len(files) < 2 {
		t.Fatalf("manifests: %v", files)
	}
	kinds := map[string]int{}
	for _, f := range files {
		objs := load(t, f)
		text, _ := os.ReadFile(f)
		byKind := map[string]map[string]object{}
		for _, o := range objs {
			kinds[o.Kind]++
			if byKind[o.Kind] == nil {
				byKind[o.Kind] = map[string]object{}
			}
			byKind[o.Kind][o.Metadata.Name] = o
		}
		for _, o := range objs {
			switch o.Kind {
			case "Deployment", "DaemonSet":
				sel, _ := o.Spec.Selector.(map[string]any)["matchLabels"].(map[string]any)
				if len(sel) == 0 {
					t.Errorf("%s: %s has no selector.matchLabels", f, o.Metadata.Name)
				}
				for k, v := range sel {
					if o.Spec.Template.Metadata.Labels[k] != v {
						t.Errorf("%s: %s selector %s=%v does not match the pod labels", f, o.Metadata.Name, k, v)
					}
				}
				ps := o.Spec.Template.Spec
				if len(ps.Containers) == 0 {
					t.Fatalf("%s: %s has no containers", f, o.Metadata.Name)
				}
				vols := map[string]bool{}
				for _, v := range ps.Volumes {
					vols[v.Name] = true
					switch {
					case v.Secret == nil:
					case operatorSecrets[v.Secret.SecretName]:
						if !bytes.Contains(text, []byte("create secret generic "+v.Secret.SecretName)) {
							t.Errorf("%s: volume %s names Secret %q, and the file does not say how to create it", f, v.Name, v.Secret.SecretName)
						}
					case byKind["Secret"][v.Secret.SecretName].Kind == "":
						t.Errorf("%s: volume %s names Secret %q, not in the file", f, v.Name, v.Secret.SecretName)
					}
					if v.ConfigMap != nil && byKind["ConfigMap"][v.ConfigMap.Name].Kind == "" {
						t.Errorf("%s: volume %s names ConfigMap %q, not in the file", f, v.Name, v.ConfigMap.Name)
					}
				}
				for _, c := range ps.Containers {
					if c.Image == "" || len(c.Args) == 0 {
						t.Errorf("%s: container %s: image %q args %v", f, c.Name, c.Image, c.Args)
					}
					sc := c.SecurityContext
					if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || !sc.ReadOnlyRootFilesystem || len(sc.Capabilities.Drop) == 0 {
						t.Errorf("%s: container %s is not hardened: %+v", f, c.Name, sc)
					}
					for _, m := range c.VolumeMounts {
						if !vols[m.Name] {
							t.Errorf("%s: mount %s has no volume", f, m.Name)
						}
					}
					shutdown := commandFlags(t, f+": "+c.Name, append(c.Command, c.Args...))
					grace := 30 * time.Second // Kubernetes' default
					if g := ps.TerminationGracePeriodSeconds; g != nil {
						grace = time.Duration(*g) * time.Second
					}
					// --shutdown-timeout twice: the requests in flight, then
					// the last first-boot statuses while the store refuses them.
					if pre := c.Lifecycle.PreStop.Sleep.Seconds; grace <= time.Duration(pre)*time.Second+2*shutdown {
						t.Errorf("%s: %s: terminationGracePeriodSeconds %v is not longer than the preStop sleep (%ds) and twice --shutdown-timeout (%v)", f, c.Name, grace, pre, shutdown)
					}
					// Every file a flag names must be mounted.
					flags := map[string]string{}
					for _, a := range c.Args {
						name, p, _ := strings.Cut(a, "=")
						flags[name] = p
						if strings.HasSuffix(name, "-file") || fileFlags[name] {
							found := false
							for _, m := range c.VolumeMounts {
								found = found || strings.HasPrefix(p, m.MountPath+"/")
							}
							if !found {
								t.Errorf("%s: %s names %s, which no volume provides", f, a, p)
							}
						}
					}
					// The bearer token and specs never cross a network in clear.
					if a, ok := flags["--admin-listen"]; ok && !strings.HasPrefix(a, "127.") && flags["--admin-tls-cert"] == "" {
						t.Errorf("%s: container %s serves the admin API on %s without --admin-tls-cert", f, c.Name, a)
					}
				}
				if o.Kind == "DaemonSet" && !ps.HostNetwork {
					t.Errorf("%s: the node DaemonSet must use hostNetwork", f)
				}
			case "Service":
				sel, _ := o.Spec.Selector.(map[string]any)
				matched := false
				for _, d := range byKind["Deployment"] {
					ok := len(sel) > 0
					for k, v := range sel {
						ok = ok && d.Spec.Template.Metadata.Labels[k] == v
					}
					matched = matched || ok
				}
				if !matched {
					t.Errorf("%s: Service %s selects no Deployment in the file", f, o.Metadata.Name)
				}
			case "Secret":
				want := []string{"admin-token", "hmac-key"}
				if o.Type == "kubernetes.io/tls" {
					want = []string{"tls.crt", "tls.key"}
				}
				for _, k := range want {
					if o.StringData[k] == "" {
						t.Errorf("%s: Secret %s lacks %s", f, o.Metadata.Name, k)
					}
				}
			case "ConfigMap":
				for k := range o.Data {
					if !strings.HasSuffix(k, ".yaml") {
						t.Errorf("%s: ConfigMap key %s is not a spec file name", f, k)
					}
				}
			}
		}
	}
	for _, k := range []string{"Deployment", "DaemonSet", "Service", "Secret", "ConfigMap"} {
		if kinds[k] == 0 {
			t.Errorf("no %s in deploy/kubernetes", k)
		}
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
	shutdown := commandFlags(t, "ExecStart", strings.Fields(e[0])[1:])
	stop, err := time.ParseDuration(strings.Join(keys["Service.TimeoutStopSec"], ""))
	if err != nil || stop <= 2*shutdown {
		t.Errorf("TimeoutStopSec = %v (%v): systemd must wait longer than twice --shutdown-timeout %v before SIGKILL (requests, then the last first-boot statuses)", keys["Service.TimeoutStopSec"], err, shutdown)
	}
}

// commandFlags parses a command line (a container's command and args:
// vminit's arguments when it names no command) as `vminit serve`,
// vminit-server or vminit-controller does, so that a misspelt or removed
// flag fails here rather than at deployment, and returns the shutdown
// timeout they set (serve's).
func commandFlags(t *testing.T, where string, line []string) time.Duration {
	t.Helper()
	programs := map[string]func() *cobra.Command{"vminit-controller": controllercmd.New, "vminit-server": servercmd.New}
	var cmd *cobra.Command
	rest := line[min(1, len(line)):]
	if len(line) > 0 && programs[path.Base(line[0])] != nil {
		cmd = programs[path.Base(line[0])]()
	} else {
		var err error
		cmd, rest, err = cli.NewRootCommand().Find(line)
		if err != nil || cmd.Name() != "serve" {
			t.Errorf("%s: %v is not a serve, vminit-server or vminit-controller command line (%v)", where, line, err)
			return 0
		}
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Errorf("%s: %v", where, err)
	}
	d, _ := cmd.Flags().GetDuration("shutdown-timeout")
	return d
}
