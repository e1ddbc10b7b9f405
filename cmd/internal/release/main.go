// Command release builds vminit's release artefacts into a directory
// (make dist): every program (./cmd/vminit...) for each target, stripped
// and version-stamped; a Debian package per Linux architecture holding the
// binary, the systemd unit, shell completions and man pages; an OCI image
// archive of the Linux programs for amd64 and arm64; SHA256SUMS.
//
// Everything is a function of the commit: the version, commit and date
// come from git (the commit's date, never the clock), builds use
// -trimpath and -buildvcs=false, archives carry the commit's time. Two
// runs at one commit write the same bytes.
//
// It is a program of its own so that its build-time libraries (nfpm,
// cobra/doc, go-containerregistry) are never linked into the programs it
// builds. It lives under cmd/internal, since it reads vminit's command tree
// (cmd/internal/cli) for the man pages and completions and only cmd/ may
// import that; it is no program the repository ships (those are
// ./cmd/vminit..., see mainPackages).
//
//	go run ./cmd/internal/release -out dist -targets "linux/amd64 darwin/arm64"
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	out := flag.String("out", "dist", "directory to write the artefacts into (replaced)")
	targets := flag.String("targets", "", "GOOS/GOARCH pairs, space-separated")
	flag.Parse()
	if err := run(context.Background(), ".", *out, strings.Fields(*targets)); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// run writes every artefact for targets into out, from the module at repo.
func run(ctx context.Context, repo, out string, targets []string) error {
	if len(targets) == 0 {
		return fmt.Errorf("no -targets given")
	}
	st, err := stampOf(ctx, repo)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	bins, err := buildAll(ctx, repo, out, st, targets)
	if err != nil {
		return err
	}
	files := bins
	for _, arch := range []string{"amd64", "arm64"} {
		progs := linuxPrograms(bins, arch)
		if len(progs) == 0 {
			continue
		}
		deb, err := writeDeb(repo, out, st, arch, progs)
		if err != nil {
			return err
		}
		files = append(files, artefact{name: "vminit", goos: "linux", goarch: arch, file: deb})
	}
	img, err := writeImage(out, st, bins)
	if err != nil {
		return err
	}
	if img != "" {
		files = append(files, artefact{name: "vminit-image", file: img})
	}
	return writeSums(out, files)
}

// linuxPrograms are the Linux programs among bins built for arch: what the
// .deb and the image of that architecture hold.
func linuxPrograms(bins []artefact, arch string) []artefact {
	var progs []artefact
	for _, b := range bins {
		if b.goos == "linux" && b.goarch == arch {
			progs = append(progs, b)
		}
	}
	return progs
}
