package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/vminit/vminit/internal/testing/testtools"
)

// standInImage writes the image archive as make image does (writeImage),
// of stand-in programs: what a registry and containerd take is the
// archive's format, not the programs (TestDist checks those). It returns
// the archive and its index's digest.
func standInImage(t *testing.T) (archive, digest string) {
	t.Helper()
	dir := t.TempDir()
	var bins []artefact
	for _, arch := range []string{"amd64", "arm64"} {
		for _, prog := range []string{"vminit", "vminit-controller"} {
			f := filepath.Join(dir, prog+"-"+arch)
			if err := os.WriteFile(f, []byte("#!stand-in for "+prog+" on "+arch+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			bins = append(bins, artefact{name: prog, goos: "linux", goarch: arch, file: f})
		}
	}
	out := filepath.Join(dir, "dist")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	st := stamp{Version: "v0.0.0-test", Commit: strings.Repeat("0", 40), Date: time.Unix(1e9, 0).UTC()}
	archive, err := writeImage(out, st, bins)
	if err != nil {
		t.Fatal(err)
	}
	d, err := os.ReadFile(filepath.Join(out, "vminit-image.digest"))
	if err != nil {
		t.Fatal(err)
	}
	return archive, strings.TrimSpace(string(d))
}

// run runs a program for at most a minute and returns its standard output,
// failing the test with its standard error.
func runTool(t *testing.T, env []string, prog string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", prog, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// TestImagePushedWithSkopeo pushes the archive to a registry as
// deploy/README.md says (skopeo copy --all --preserve-digests
// oci-archive:… docker://…; the registry is go-containerregistry's, in
// process on loopback), then pulls it back by the digest make image wrote
// and by its tag: the same index, both architectures, so the digest the
// manifests pin is the one the registry serves. skopeo, not crane: crane
// is no Debian package.
func TestImagePushedWithSkopeo(t *testing.T) {
	skopeo := testtools.Require(t, "skopeo")
	archive, digest := standInImage(t)
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	tmp := t.TempDir()
	runTool(t, []string{"TMPDIR=" + tmp, "HOME=" + tmp}, skopeo, "copy", "--all", "--preserve-digests", "--dest-tls-verify=false",
		"oci-archive:"+archive, "docker://"+host+"/vminit:v0.0.0-test")

	// Pulled back as a runtime does (the registry API over HTTP): the
	// index by digest and by tag, each image it lists, their configs and
	// layers, every one the bytes its digest names.
	pull := func(path, accept string) []byte {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, reg.URL+"/v2/vminit/"+path, nil)
		req.Header.Set("Accept", accept)
		resp, err := reg.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %v", path, resp.Status, err)
		}
		return body
	}
	digestOf := func(b []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(b)) }
	var index v1.IndexManifest
	for _, ref := range []string{digest, "v0.0.0-test"} {
		body := pull("manifests/"+ref, string(types.OCIImageIndex))
		if got := digestOf(body); got != digest {
			t.Errorf("the registry serves %s as index %s, make image wrote %s", ref, got, digest)
		}
		if err := json.Unmarshal(body, &index); err != nil {
			t.Fatal(err)
		}
	}
	var images []string
	for _, d := range index.Manifests {
		images = append(images, d.Platform.Architecture+" "+d.Digest.String())
		body := pull("manifests/"+d.Digest.String(), string(d.MediaType))
		var m v1.Manifest
		if err := json.Unmarshal(body, &m); err != nil || digestOf(body) != d.Digest.String() {
			t.Fatalf("%s: %v, or not the bytes of its digest", d.Platform.Architecture, err)
		}
		for _, blob := range append([]v1.Descriptor{m.Config}, m.Layers...) {
			if got := digestOf(pull("blobs/"+blob.Digest.String(), "*/*")); got != blob.Digest.String() {
				t.Errorf("%s: blob %s served as %s", d.Platform.Architecture, blob.Digest, got)
			}
		}
	}
	if want := indexOf(t, archive); !slices.Equal(images, want) {
		t.Errorf("the registry's index lists %v, the archive's %v", images, want)
	}
}

// indexOf lists the archive's images (architecture and digest), read with
// go-containerregistry's own OCI layout reader.
func indexOf(t *testing.T, archive string) []string {
	t.Helper()
	dir := t.TempDir()
	untar(t, archive, dir)
	p, err := layoutIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestImageImportedByContainerd loads the archive into a containerd as
// deploy/README.md says for a node without a registry (ctr -n k8s.io
// images import --digests --base-name localhost/vminit), on a containerd
// of its own (root, state and socket under the test's directory; no CRI
// plugin), and reads back what containerd lists: the image by its name and
// by NAME@DIGEST with the digest make image wrote. NAME@DIGEST is what a
// pinned manifest asks the kubelet for, and the CRI finds an image only
// under a name containerd has for it: without --base-name, --digests names
// it import-DATE@DIGEST.
func TestImageImportedByContainerd(t *testing.T) {
	containerd := testtools.Require(t, "containerd")
	ctr := testtools.Require(t, "ctr")
	if os.Geteuid() != 0 {
		testtools.Missing(t, "containerd runs as root only")
	}
	archive, digest := standInImage(t)
	sock := startContainerd(t, containerd)
	ctrAt := func(args ...string) string {
		return runTool(t, nil, ctr, append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)...)
	}
	out := ctrAt("images", "import", "--digests", "--base-name", imageRepo, archive)
	t.Logf("ctr images import:\n%s", out)

	listed := map[string]string{} // name: digest
	sc := bufio.NewScanner(strings.NewReader(ctrAt("images", "ls")))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && f[0] != "REF" {
			listed[f[0]] = f[2]
		}
	}
	for _, ref := range []string{imageRepo + ":v0.0.0-test", imageRepo + "@" + digest} {
		if listed[ref] != digest {
			t.Errorf("containerd lists %s as %q, want %s: %v", ref, listed[ref], digest, listed)
		}
	}
}

// startContainerd runs containerd with everything under a temporary
// directory, and stops it when the test ends; it returns its socket.
func startContainerd(t *testing.T, bin string) string {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "containerd.sock")
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
# Images only: no CRI (the kubelet's), whose start wants a CNI and cgroups.
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[ttrpc]
  address = %q
[plugins."io.containerd.internal.v1.opt"]
  path = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, sock+".ttrpc", filepath.Join(dir, "opt"))
	cfgFile := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var log testtools.SyncBuffer
	cmd := exec.Command(bin, "--config", cfgFile)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("containerd's log:\n%s", log.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			return sock
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd did not open %s within 30 s:\n%s", sock, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// layoutIndex lists the images of the index an OCI layout's index.json
// names (make image's archive holds one), as "ARCH DIGEST".
func layoutIndex(dir string) ([]string, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	tm, err := top.IndexManifest()
	if err != nil || len(tm.Manifests) != 1 {
		return nil, fmt.Errorf("index.json: %v, %d entries", err, len(tm.Manifests))
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var images []string
	for _, d := range m.Manifests {
		images = append(images, d.Platform.Architecture+" "+d.Digest.String())
	}
	return images, nil
}
