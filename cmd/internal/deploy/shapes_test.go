package deploy

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/testing/kubetest"
)

// shapes are what an operator applies: an entry directory of
// deploy/kubernetes (kubectl apply -k DIR), and the components a site
// adds to it in a kustomization of its own.
var shapes = []struct {
	name, dir  string
	components []string
}{
	{"controller", ".", nil},
	{"controller with the TLS admin Service", ".", []string{"components/server-admin-tls"}},
	{"node", "node", nil},
	{"node with the CNI data path", "node", []string{"components/node-agent-cni"}},
	{"fleet", "fleet", nil},
}

// placeholder is the image each entry names until the operator sets one:
// it cannot be pulled (.invalid never resolves) and says what to do.
const placeholder = "unset.invalid/vminit:set-the-image-by-digest"

// TestShapes builds each shape with kubectl kustomize as shipped (every
// container runs the placeholder) and after `kustomize edit set image
// vminit=REF@DIGEST` (every container runs exactly that reference),
// checks what it built (checkShape), and applies every shape to a real API
// server, which validates each object strictly and whose PodSecurity
// admission would warn of a workload its namespace does not admit; then
// asks what the node agents may do.
func TestShapes(t *testing.T) {
	kubectl := kubetest.Binary(t, "kubectl")
	s := kubetest.Start(t)
	s.CreateCRDs(t, kubetest.KubeVirtCRDs) // the node agents' Role names VMIs
	const ref = "127.0.0.1:5000/vminit@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			shipped := kustomize(t, kubectl, site(t, sh.dir, sh.components, ""))
			for _, o := range decode(t, sh.name, shipped) {
				ps := o.Spec.Template.Spec
				for _, c := range append(ps.Containers, ps.InitContainers...) {
					if c.Image != placeholder {
						t.Errorf("as shipped, %s %s runs %q, want the placeholder %q", o.Metadata.Name, c.Name, c.Image, placeholder)
					}
				}
			}
			built := kustomize(t, kubectl, site(t, sh.dir, sh.components, ref))
			if bytes.Contains(built, []byte(":latest")) || bytes.Contains(built, []byte("unset.invalid")) {
				t.Errorf("the build names :latest or the placeholder:\n%s", built)
			}
			checkShape(t, sh.name, decode(t, sh.name, built), ref)

			f := filepath.Join(t.TempDir(), "built.yaml")
			if err := os.WriteFile(f, built, 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", s.Kubeconfig, "apply", "--validate=strict", "-f", f)
			home := t.TempDir()
			cmd.Env = append(os.Environ(), "HOME="+home, "KUBECACHEDIR="+filepath.Join(home, "cache"))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil || strings.Contains(stderr.String(), "PodSecurity") {
				t.Errorf("kubectl apply: %v\n%s", err, stderr.String())
			}
		})
	}
	checkNodeAgentRBAC(t, s)
}

// checkNodeAgentRBAC: a node agent reads VMIs and Instances in the
// namespaces it is bound in, the Secrets Instances name by name and never
// a list, and writes first-boot statuses, not specs; nothing elsewhere.
func checkNodeAgentRBAC(t *testing.T, s *kubetest.Server) {
	t.Helper()
	const node = "system:serviceaccount:vminit-node:vminit-node"
	for _, c := range []struct{ verb, resource, sub, ns, want string }{
		{"watch", "virtualmachineinstances.kubevirt.io", "", "default", "yes"},
		{"list", "virtualmachineinstances.kubevirt.io", "", "default", "yes"},
		{"update", "virtualmachineinstances.kubevirt.io", "", "default", "no"},
		{"watch", "virtualmachines.kubevirt.io", "", "default", "yes"},
		{"watch", "instances.vminit.dev", "", "default", "yes"},
		{"patch", "instances.vminit.dev", "", "default", "no"},
		{"patch", "instances.vminit.dev", "status", "default", "yes"},
		{"get", "secrets", "", "default", "yes"},
		{"list", "secrets", "", "default", "no"},
		{"watch", "secrets", "", "default", "no"},
		{"get", "configmaps", "", "default", "yes"},
		{"create", "events", "", "default", "yes"},
		{"get", "secrets", "", "vminit-node", "no"},
		{"get", "secrets", "", "vminit-system", "no"},
		{"watch", "virtualmachineinstances.kubevirt.io", "", "elsewhere", "no"},
	} {
		args := []string{"auth", "can-i", c.verb, c.resource, "--as", node, "-n", c.ns}
		if c.sub != "" {
			args = append(args, "--subresource", c.sub)
		}
		out, _ := s.Kubectl(t, args...) // exit 1 for "no"
		if got := strings.TrimSpace(out); got != c.want {
			t.Errorf("kubectl %s: %q, want %q", strings.Join(args, " "), got, c.want)
		}
	}
}

// site copies deploy/kubernetes into a temporary directory, sets the image
// of the entry dir as `kustomize edit set image vminit=REF` does when ref
// is not empty, and returns the directory to build: the entry, or a site
// kustomization beside the copy adding components to it.
func site(t *testing.T, dir string, components []string, ref string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.CopyFS(filepath.Join(root, "kubernetes"), os.DirFS("kubernetes")); err != nil {
		t.Fatal(err)
	}
	entry := filepath.Join(root, "kubernetes", dir)
	if ref != "" {
		setImage(t, filepath.Join(entry, "kustomization.yaml"), "vminit", ref)
	}
	if len(components) == 0 {
		return entry
	}
	k := map[string]any{"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
		"resources": []string{filepath.Join("../kubernetes", dir)}}
	var cs []string
	for _, c := range components {
		cs = append(cs, "../kubernetes/"+c)
	}
	k["components"] = cs
	writeYAML(t, filepath.Join(root, "site", "kustomization.yaml"), k)
	return filepath.Join(root, "site")
}

// setImage edits a kustomization as `kustomize edit set image NAME=REF`
// does (kustomize/commands/edit/set/setimage.go): the images: entry of
// that name is replaced whole, by the new name and the digest or tag.
func setImage(t *testing.T, file, name, ref string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var k map[string]any
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	entry := map[string]any{"name": name}
	if n, d, ok := strings.Cut(ref, "@"); ok {
		entry["newName"], entry["digest"] = n, d
	} else {
		t.Fatalf("setImage %s: want NAME@DIGEST", ref)
	}
	images, _ := k["images"].([]any)
	found := false
	for i, im := range images {
		if m, _ := im.(map[string]any); m["name"] == name {
			images[i], found = entry, true
		}
	}
	if !found {
		t.Fatalf("%s: no images: entry named %s", file, name)
	}
	writeYAML(t, file, k)
}

func writeYAML(t *testing.T, file string, v any) {
	t.Helper()
	data, err := yaml.Marshal(v)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(file), 0o755)
	}
	if err == nil {
		err = os.WriteFile(file, data, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// kustomize is `kubectl kustomize dir`: what `kubectl apply -k dir` applies.
func kustomize(t *testing.T, kubectl, dir string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectl, "kustomize", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	return out
}
