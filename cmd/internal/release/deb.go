package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/vminit/vminit/cmd/internal/cli"
)

// debVersion is st.Version as Debian orders it: no leading v, and "~"
// for "-" so that a pre-release or pseudo-version sorts before the
// release it leads to.
func debVersion(st stamp) string {
	return strings.ReplaceAll(strings.TrimPrefix(st.Version, "v"), "-", "~")
}

// writeDeb packages the Linux programs progs of arch as
// out/vminit_VERSION_ARCH.deb: the programs in /usr/bin, deploy/systemd's units (installed, not enabled: serve needs an
// admin token first, and the address unit the bridge's name), completions for bash, zsh and fish, and a man page
// per vminit command, all generated from the command tree this tool links.
func writeDeb(repo, out string, st stamp, arch string, progs []artefact) (string, error) {
	stage, err := os.MkdirTemp("", "vminit-deb-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(stage)
	generated, err := writeDocs(stage, st)
	if err != nil {
		return "", err
	}
	file := func(src, dst string, mode fs.FileMode) *files.Content {
		return &files.Content{Source: src, Destination: dst, FileInfo: &files.ContentFileInfo{Mode: mode, MTime: st.Date}}
	}
	contents := files.Contents{
		file(filepath.Join(repo, "deploy/systemd/vminit-serve.service"), "/usr/lib/systemd/system/vminit-serve.service", 0o644),
		file(filepath.Join(repo, "deploy/systemd/vminit-mds-address@.service"), "/usr/lib/systemd/system/vminit-mds-address@.service", 0o644),
	}
	for _, p := range progs {
		contents = append(contents, file(p.file, "/usr/bin/"+p.name, 0o755))
	}
	for src, dst := range generated {
		contents = append(contents, file(src, dst, 0o644))
	}
	info := nfpm.WithDefaults(&nfpm.Info{
		Name:          "vminit",
		Arch:          arch,
		Platform:      "linux",
		Version:       debVersion(st),
		VersionSchema: "none", // debVersion is already Debian's
		Section:       "admin",
		Priority:      "optional",
		Maintainer:    "vminit <vminit@users.noreply.github.com>",
		Homepage:      "https://github.com/vminit/vminit",
		Description: "first-boot data for virtual machines\n" +
			"vminit renders one instance spec to cloud-init seeds (ISO9660, VFAT) and\n" +
			"Ignition configs, and serves them from a metadata server (EC2, OpenStack,\n" +
			"NoCloud-net, Ignition).",
		MTime:        st.Date,
		Overridables: nfpm.Overridables{Contents: contents},
	})
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return "", fmt.Errorf("deb: %v", err)
	}
	name := filepath.Join(out, fmt.Sprintf("vminit_%s_%s.deb", info.Version, arch))
	var buf bytes.Buffer
	if err := deb.Default.Package(info, &buf); err != nil {
		return "", fmt.Errorf("deb %s: %v", name, err)
	}
	return name, os.WriteFile(name, buf.Bytes(), 0o644)
}

// writeDocs writes the completions and gzipped man pages into stage and
// returns where each goes in the package.
func writeDocs(stage string, st stamp) (map[string]string, error) {
	root := cli.NewRootCommand()
	at := map[string]string{}
	completions := []struct {
		dst string
		gen func(*cobra.Command, *bytes.Buffer) error
	}{
		{"/usr/share/bash-completion/completions/vminit", func(c *cobra.Command, b *bytes.Buffer) error { return c.GenBashCompletionV2(b, true) }},
		{"/usr/share/zsh/vendor-completions/_vminit", func(c *cobra.Command, b *bytes.Buffer) error { return c.GenZshCompletion(b) }},
		{"/usr/share/fish/vendor_completions.d/vminit.fish", func(c *cobra.Command, b *bytes.Buffer) error { return c.GenFishCompletion(b, true) }},
	}
	for _, c := range completions {
		var b bytes.Buffer
		if err := c.gen(root, &b); err != nil {
			return nil, fmt.Errorf("completion %s: %v", c.dst, err)
		}
		src := filepath.Join(stage, filepath.Base(c.dst))
		if err := os.WriteFile(src, b.Bytes(), 0o644); err != nil {
			return nil, err
		}
		at[src] = c.dst
	}
	man := filepath.Join(stage, "man")
	if err := os.Mkdir(man, 0o755); err != nil {
		return nil, err
	}
	date := st.Date
	header := &doc.GenManHeader{Title: "VMINIT", Section: "1", Date: &date, Source: "vminit " + st.Version, Manual: "vminit manual"}
	if err := doc.GenManTree(root, header, man); err != nil {
		return nil, fmt.Errorf("man pages: %v", err)
	}
	pages, err := os.ReadDir(man)
	if err != nil {
		return nil, err
	}
	for _, p := range pages {
		src := filepath.Join(man, p.Name())
		if err := gzipFile(src); err != nil {
			return nil, err
		}
		at[src+".gz"] = "/usr/share/man/man1/" + p.Name() + ".gz"
	}
	return at, nil
}

// gzipFile replaces name with name.gz, compressed as Debian wants man
// pages (best compression, no name or time in the header).
func gzipFile(name string) error {
	data, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(name+".gz", b.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Remove(name)
}
