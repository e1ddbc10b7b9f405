package virtlet_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
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

// buildCorpusObject converts a corpus file, or the one pod of it a
// FILE#Pod/NAME key names, and returns the result with the pod.
func buildCorpusObject(t *testing.T, key string) (*platform.Result, *corev1.Pod) {
	t.Helper()
	file, obj, _ := strings.Cut(key, "#")
	data, err := os.ReadFile(filepath.Join(corpusDir, file))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := platform.Split(file, data)
	if err != nil {
		t.Fatal(err)
	}
	var pods, others []*platform.Document
	for _, d := range docs {
		switch {
		case d.Kind == "Pod" && (obj == "" || obj == "Pod/"+d.Name):
			pods = append(pods, d)
		case platform.IsReferenced(d):
			others = append(others, d)
		}
	}
	if len(pods) != 1 {
		t.Fatalf("%d pods", len(pods))
	}
	rs, err := convert.Documents(t.Context(), append(others, pods[0]), platform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := pods[0].Decode(&pod); err != nil {
		t.Fatal(err)
	}
	return rs[0], &pod
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
