package virtlet_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/internal/testing/platformtest"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/convert"
	"github.com/vminit/vminit/seed"
)

const corpusDir = "../testdata/corpus/virtlet"

// TestCorpusMatchesVirtlet builds every Virtlet corpus object that builds
// (expect.txt's "builds" lines) and compares, as cloud-init's own NoCloud
// code reads them, its seed with the seed Virtlet's generator
// (pkg/libvirttools/cloudinit.go) writes for the same pod: the instance-id,
// host name and SSH keys of the meta-data, the user data (a script byte for
// byte; a #cloud-config key by key of the merged config) and the network
// config. virtletSeed is that generator's rules, read from Virtlet's code.
func TestCorpusMatchesVirtlet(t *testing.T) {
	cloudinittest.Require(t)
	for _, key := range buildingCorpusObjects(t) {
		t.Run(key, func(t *testing.T) {
			r, pod := buildCorpusObject(t, key)
			vm := readSeedDir(t, func(dir string) {
				s, err := seed.Build(r.Instance, seed.NoCloud, seed.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if err := s.WriteDir(dir, 0o600); err != nil {
					t.Fatal(err)
				}
			})
			want, cniNetwork := virtletSeed(t, pod)
			vt := readSeedDir(t, func(dir string) {
				for name, data := range want {
					if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			})
			platformtest.Eq(t, "instance-id", vm.InstanceID, vt.InstanceID)
			platformtest.Eq(t, "hostname", vm.Hostname, vt.Hostname)
			platformtest.Eq(t, "SSH keys", vm.Keys, vt.Keys)
			if isScript(vt.UserData) {
				platformtest.Eq(t, "user data (the script)", string(vm.UserData), string(vt.UserData))
			}
			// Virtlet's keys of the final cloud-config; vminit carries the
			// flexvolume mounts and the generated files its own way
			// (docs/platforms/virtlet.md), so only the user's keys are held
			// equal here.
			for k, v := range vt.Config {
				if mounts(pod) && containsAll(vm.Config[k], v) {
					// Both add the volumes' mounts to the user's lists
					// (runcmd, write_files), each its own way: the user's
					// entries are all there.
					continue
				}
				platformtest.Eq(t, "final config "+k, vm.Config[k], v)
			}
			// Virtlet described the CNI result, known only once the pod
			// runs: vminit leaves the network to DHCP and warns.
			if vm.NetworkConfig != nil {
				t.Errorf("network-config = %v, want none", vm.NetworkConfig)
			}
			warned := slices.ContainsFunc(r.Warnings, func(w string) bool { return strings.Contains(w, noNet) })
			if warned != cniNetwork {
				t.Errorf("no-network warning = %v, want %v (Virtlet writes a CNI network-config: %v)", warned, cniNetwork, cniNetwork)
			}
		})
	}
}

// mounts reports whether the pod's VM mounts volumes, for which Virtlet
// and vminit each add their own entries to the user's runcmd and files.
func mounts(pod *corev1.Pod) bool {
	return len(pod.Spec.Containers) > 0 && len(pod.Spec.Containers[0].VolumeMounts) > 0
}

// containsAll reports whether got, a list, holds every entry of want.
func containsAll(got, want any) bool {
	g, ok1 := got.([]any)
	w, ok2 := want.([]any)
	if !ok1 || !ok2 {
		return false
	}
	for _, e := range w {
		if !slices.ContainsFunc(g, func(x any) bool { return reflect.DeepEqual(x, e) }) {
			return false
		}
	}
	return true
}

func isScript(ud []byte) bool { return strings.HasPrefix(string(ud), "#!") }

// buildingCorpusObjects lists the keys (FILE or FILE#Pod/NAME) of
// expect.txt's "builds" lines.
func buildingCorpusObjects(t *testing.T) []string {
	f, err := os.Open(filepath.Join(corpusDir, "expect.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var keys []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if key, rest, ok := strings.Cut(sc.Text(), " "); ok && !strings.HasPrefix(key, "#") && strings.HasPrefix(rest, "builds:") {
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		t.Fatal("no building object in expect.txt")
	}
	return keys
}

// buildCorpusObject converts a corpus file, or the one object of it a
// FILE#KIND/NAME key names, as `vminit build [--object KIND/NAME]` does,
// and returns the result with the pod: a Pod, or the pod template of a
// Deployment or StatefulSet, named after it as vminit names it.
func buildCorpusObject(t *testing.T, key string) (*platform.Result, *corev1.Pod) {
	t.Helper()
	file, obj, _ := strings.Cut(key, "#")
	data, err := os.ReadFile(filepath.Join(corpusDir, file))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := convert.Read(t.Context(), file, data, platform.Options{Object: obj})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := platform.Split(file, data)
	if err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	for _, d := range docs {
		if obj != "" && obj != d.Kind+"/"+d.Name {
			continue
		}
		switch d.Kind {
		case "Pod":
			var pod corev1.Pod
			if err := d.Decode(&pod); err != nil {
				t.Fatal(err)
			}
			pods = append(pods, &pod)
		case "Deployment", "StatefulSet":
			var w struct {
				Spec struct {
					Template corev1.PodTemplateSpec `json:"template"`
				} `json:"spec"`
			}
			if err := json.Unmarshal(d.JSON, &w); err != nil {
				t.Fatal(err)
			}
			pod := &corev1.Pod{ObjectMeta: w.Spec.Template.ObjectMeta, Spec: w.Spec.Template.Spec}
			pod.Name, pod.Namespace = d.Name, d.Namespace
			if d.Kind == "StatefulSet" {
				pod.Name += "-0" // its first pod, as vminit builds it by default
			}
			pods = append(pods, pod)
		}
	}
	if len(rs) != 1 || len(pods) != 1 {
		t.Fatalf("%d results, %d pods", len(rs), len(pods))
	}
	return rs[0], pods[0]
}

func readSeedDir(t *testing.T, write func(dir string)) *cloudinittest.Seed {
	t.Helper()
	dir := t.TempDir()
	write(dir)
	return cloudinittest.ReadSeed(t, cloudinittest.NoCloudReader, dir, nil)
}

// virtletSeed is the NoCloud seed Virtlet's CloudInitGenerator writes for
// pod (the corpus uses no data source, so the annotations alone): meta-data
// JSON with instance-id <pod>.<namespace>, local-hostname <pod> and
// public-keys, overlaid by VirtletCloudInitMetaData; user data the script
// given whole, else #cloud-config of VirtletCloudInitUserData. cni reports
// whether Virtlet also writes a network-config from the CNI result: unless
// VirtletForceDHCPNetworkConfig or a persistent root (a volume device at
// "/").
func virtletSeed(t *testing.T, pod *corev1.Pod) (files map[string][]byte, cni bool) {
	t.Helper()
	a := pod.Annotations
	ns := pod.Namespace
	if ns == "" {
		ns = "default"
	}
	md := map[string]any{"instance-id": pod.Name + "." + ns, "local-hostname": pod.Name}
	var keys []string
	for _, k := range strings.Split(a["VirtletSSHKeys"], "\n") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		md["public-keys"] = keys
	}
	var over map[string]any
	if err := yaml.Unmarshal([]byte(a["VirtletCloudInitMetaData"]), &over); err != nil {
		t.Fatal(err)
	}
	for k, v := range over {
		md[k] = v
	}
	mdJSON, err := json.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	ud := []byte(a["VirtletCloudInitUserDataScript"])
	if len(ud) == 0 {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(a["VirtletCloudInitUserData"]), &m); err != nil {
			t.Fatal(err)
		}
		out, err := yaml.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		// Virtlet writes a bare "#cloud-config" line then, which
		// cloud-init logs as an empty part and skips: no user data.
		if len(m) > 0 {
			ud = append([]byte("#cloud-config\n"), out...)
		}
	}
	root := slices.ContainsFunc(pod.Spec.Containers[0].VolumeDevices, func(d corev1.VolumeDevice) bool { return d.DevicePath == "/" })
	return map[string][]byte{"meta-data": mdJSON, "user-data": ud}, a["VirtletForceDHCPNetworkConfig"] != "true" && !root
}
