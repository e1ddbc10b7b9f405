package main

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// checkImage opens the image archive dist wrote (TestDist compared two
// builds of it byte for byte, so its digest is stable): an index of
// linux/amd64 and linux/arm64, each holding every program in /usr/bin, run
// as a non-root user with /usr/bin/vminit as the entrypoint, named for podman load; and the native binary, taken
// out of its layer, runs.
func checkImage(t *testing.T, dist string, st stamp) {
	t.Helper()
	dir := t.TempDir()
	untar(t, filepath.Join(dist, "vminit-image.tar"), dir)
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, _ := top.IndexManifest()
	if len(tm.Manifests) != 1 || tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != imageRepo+":"+st.Version {
		t.Fatalf("index.json: want one index named %s:%s, got %+v", imageRepo, st.Version, tm.Manifests)
	}
	digest, _ := os.ReadFile(filepath.Join(dist, "vminit-image.digest"))
	if got := tm.Manifests[0].Digest.String() + "\n"; got != string(digest) {
		t.Errorf("vminit-image.digest = %q, the archive's index is %q", digest, got)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	var arches []string
	for _, m := range im.Manifests {
		arches = append(arches, m.Platform.OS+"/"+m.Platform.Architecture)
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Config.User != imageUser || !slices.Equal(cfg.Config.Entrypoint, []string{"/usr/bin/vminit"}) ||
			!slices.Equal(cfg.Config.Env, []string{"PATH=/usr/bin"}) || cfg.Architecture != m.Platform.Architecture {
			t.Errorf("%s: user %q, entrypoint %q, env %q, architecture %q", m.Platform.Architecture, cfg.Config.User, cfg.Config.Entrypoint, cfg.Config.Env, cfg.Architecture)
		}
		layers, _ := img.Layers()
		if len(layers) != 1 {
			t.Fatalf("%s: %d layers, want 1", m.Platform.Architecture, len(layers))
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		root := t.TempDir()
		names := extract(t, rc, root)
		for _, p := range programs(t) {
			if !slices.Contains(names, "usr/bin/"+p) {
				t.Errorf("%s: layer holds %v, no usr/bin/%s", m.Platform.Architecture, names, p)
			}
		}
		if m.Platform.Architecture == runtime.GOARCH {
			checkVersion(t, filepath.Join(root, "usr/bin/vminit"), st)
		}
	}
	if !slices.Equal(arches, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("index: %v, want linux/amd64 and linux/arm64", arches)
	}
	if podman, err := exec.LookPath("podman"); err == nil {
		t.Logf("podman at %s: not run (rootless storage is shared state)", podman)
	}
}

// untar unpacks the tar file name into dir.
func untar(t *testing.T, name, dir string) {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	extract(t, f, dir)
}

// extract writes the regular files of the tar stream r under dir and
// returns their names.
func extract(t *testing.T, r io.Reader, dir string) []string {
	t.Helper()
	var names []string
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(dst, dir+string(filepath.Separator)) {
			t.Fatalf("tar entry %q leaves the directory", h.Name)
		}
		if h.Typeflag == tar.TypeDir {
			os.MkdirAll(dst, 0o755)
			continue
		}
		os.MkdirAll(filepath.Dir(dst), 0o755)
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, os.FileMode(h.Mode)&0o777); err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

// programs are the names of the repository's main packages.
func programs(t *testing.T) []string {
	pkgs, err := mainPackages(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pkgs {
		pkgs[i] = path.Base(p)
	}
	return pkgs
}
