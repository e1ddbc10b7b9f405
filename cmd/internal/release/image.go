package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// imageRepo is the name the archive gives its image when loaded (podman
// load; ctr images import, which with --digests --base-name imageRepo also
// names it imageRepo@DIGEST, the reference a manifest pins). localhost: it
// is a build of this checkout, published nowhere; an operator who pushes it
// names it after their registry (deploy/README.md), and the manifests run
// whatever their kustomization's images: entry says.
const imageRepo = "localhost/vminit"

// imageBin is where the image holds the programs (and its PATH).
const imageBin = "usr/bin/"

// imageUser runs the image's programs: no account, no home, not root.
const imageUser = "65532:65532"

// writeImage writes out/vminit-image.tar, an OCI image archive (podman
// load; ctr images import; skopeo copy oci-archive: to a registry):
// an index of one image per Linux architecture in bins, each a single
// layer holding that architecture's programs in /usr/bin and nothing else
// (no shell, no libc: they are static), run as imageUser with
// /usr/bin/vminit as the entrypoint. Every time in it is the commit's. It also writes
// out/vminit-image.digest, the index's digest, to pin the image by.
func writeImage(out string, st stamp, bins []artefact) (string, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range []string{"amd64", "arm64"} {
		progs := linuxPrograms(bins, arch)
		if len(progs) == 0 {
			continue
		}
		img, err := imageOf(st, arch, progs)
		if err != nil {
			return "", err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	if m, err := idx.IndexManifest(); err != nil || len(m.Manifests) == 0 {
		return "", err // no Linux target: no image
	}
	digest, err := idx.Digest()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "vminit-image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", err
	}
	ref := imageRepo + ":" + st.Version
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref, // podman load names the image by it
		"io.containerd.image.name":          ref, // ctr images import (containerd) likewise
	})); err != nil {
		return "", err
	}
	name := filepath.Join(out, "vminit-image.tar")
	if err := tarDir(dir, name, st); err != nil {
		return "", err
	}
	return name, os.WriteFile(filepath.Join(out, "vminit-image.digest"), []byte(digest.String()+"\n"), 0o644)
}

// imageOf is the image of one architecture's programs.
func imageOf(st stamp, arch string, progs []artefact) (v1.Image, error) {
	var files bytes.Buffer
	tw := tar.NewWriter(&files)
	for _, d := range []string{"usr/", "usr/bin/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: st.Date, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	for _, b := range progs {
		data, err := os.ReadFile(b.file)
		if err != nil {
			return nil, err
		}
		h := &tar.Header{Name: imageBin + b.name, Mode: 0o755, Size: int64(len(data)), ModTime: st.Date, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		tw.Write(data)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(files.Bytes())), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: st.Date}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{Created: created, CreatedBy: "vminit release " + st.Version}})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = "linux", arch, created
	cfg.Config.User = imageUser
	cfg.Config.Entrypoint = []string{"/" + imageBin + "vminit"}
	cfg.Config.Env = []string{"PATH=/" + strings.TrimSuffix(imageBin, "/")} // command: [vminit-controller] or [vminit-server] in deploy/kubernetes
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.source":   "https://github.com/vminit/vminit",
		"org.opencontainers.image.version":  st.Version,
		"org.opencontainers.image.revision": st.Commit,
	}
	return mutate.ConfigFile(img, cfg)
}

// tarDir writes the tree at dir into the tar file name: sorted, owned by
// root, every time the commit's.
func tarDir(dir, name string, st stamp) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: st.Date, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if d.IsDir() {
			h.Name, h.Mode, h.Typeflag = h.Name+"/", 0o755, tar.TypeDir
			return tw.WriteHeader(h)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		h.Size = int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	return nil
}
