package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// stamp is what a release build records about its commit.
type stamp struct {
	Version string    // the tag at HEAD, else a Go pseudo-version; "-dirty" when the tree has changes
	Commit  string    // the full hash
	Date    time.Time // the commit's date, UTC
}

// stampOf reads the stamp of the checkout at repo from git.
func stampOf(ctx context.Context, repo string) (stamp, error) {
	fields, err := git(ctx, repo, "log", "-1", "--format=%H %ct")
	if err != nil {
		return stamp{}, err
	}
	var st stamp
	var secs string
	if _, err := fmt.Sscan(fields, &st.Commit, &secs); err != nil {
		return stamp{}, fmt.Errorf("git log: %q: %v", fields, err)
	}
	n, err := strconv.ParseInt(secs, 10, 64)
	if err != nil {
		return stamp{}, fmt.Errorf("git log: commit time %q: %v", secs, err)
	}
	st.Date = time.Unix(n, 0).UTC()
	st.Version, _ = git(ctx, repo, "describe", "--tags", "--exact-match", "--match", "v[0-9]*")
	if st.Version == "" {
		st.Version = "v0.0.0-" + st.Date.Format("20060102150405") + "-" + st.Commit[:12]
	}
	// Untracked files (dist/ itself) do not count: they are not built.
	if changed, err := git(ctx, repo, "status", "--porcelain", "--untracked-files=no"); err != nil {
		return stamp{}, err
	} else if changed != "" {
		st.Version += "-dirty"
	}
	return st, nil
}

func git(ctx context.Context, repo string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", repo}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return strings.TrimSpace(string(out)), nil
}

// artefact is one file written into the output directory.
type artefact struct {
	name, goos, goarch string
	file               string // its path
}

// shipped is the pattern of every program the repository ships, however
// many there are: cmd/vminit and cmd/vminit-*, and not cmd/internal (the
// programs' packages, and this tool). make builds the same set.
const shipped = "./cmd/vminit..."

// mainPackages lists the main packages of shipped.
func mainPackages(ctx context.Context, repo string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`, shipped)
	cmd.Dir, cmd.Stderr = repo, os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %v", shipped, err)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("go list %s: no main package", shipped)
	}
	return pkgs, nil
}

// stampVar is the package whose variables -X sets (cmdkit.Version, which
// every program's --version and `vminit version` print).
const stampVar = "github.com/vminit/vminit/cmd/internal/cmdkit.stamped"

// buildAll builds every main package for every target into out, named
// NAME-GOOS-GOARCH (.exe on Windows).
func buildAll(ctx context.Context, repo, out string, st stamp, targets []string) ([]artefact, error) {
	pkgs, err := mainPackages(ctx, repo)
	if err != nil {
		return nil, err
	}
	ldflags := fmt.Sprintf("-s -w -X %sVersion=%s -X %sCommit=%s -X %sDate=%s",
		stampVar, st.Version, stampVar, st.Commit, stampVar, st.Date.Format(time.RFC3339))
	var arts []artefact
	for _, t := range targets {
		goos, goarch, ok := strings.Cut(t, "/")
		if !ok {
			return nil, fmt.Errorf("target %q: want GOOS/GOARCH", t)
		}
		for _, pkg := range pkgs {
			a := artefact{name: path.Base(pkg), goos: goos, goarch: goarch}
			a.file = filepath.Join(out, a.name+"-"+goos+"-"+goarch)
			if goos == "windows" {
				a.file += ".exe"
			}
			cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", a.file, pkg)
			cmd.Dir, cmd.Stdout, cmd.Stderr = repo, os.Stderr, os.Stderr
			// Static binaries; GOFLAGS of the caller's environment would change the bytes.
			cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0", "GOFLAGS=")
			if err := cmd.Run(); err != nil {
				return nil, fmt.Errorf("go build %s for %s: %v", pkg, t, err)
			}
			arts = append(arts, a)
		}
	}
	return arts, nil
}

// writeSums writes SHA256SUMS (sha256sum -c reads it) for files, sorted
// by name.
func writeSums(out string, files []artefact) error {
	var lines []string
	for _, a := range files {
		f, err := os.Open(a.file)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
		lines = append(lines, fmt.Sprintf("%x  %s\n", h.Sum(nil), filepath.Base(a.file)))
	}
	slices.SortFunc(lines, func(a, b string) int { return strings.Compare(a[66:], b[66:]) })
	return os.WriteFile(filepath.Join(out, "SHA256SUMS"), []byte(strings.Join(lines, "")), 0o644)
}
