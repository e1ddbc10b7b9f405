package iso9660

// The tests in this file hand the images to independent readers: bsdtar
// (libarchive), xorriso (libisofs), isoinfo (genisoimage), 7-Zip and
// libblkid. Our own Reader agreeing with the Writer proves little; these
// programs are what cloudbase-init, Linux distributions and users run.

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/testtools"
)

// run executes a tool and returns its combined output, failing the test
// when it exits non-zero.
func run(t *testing.T, tool string, args ...string) string {
	t.Helper()
	cmd := exec.Command(tool, args...)
	// UTF-8 names must come out as UTF-8, not as escapes.
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(tool), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// modeOf formats the mode an independent reader should show, as ls does.
func modeOf(e treeEntry) string {
	if e.dir {
		return (fs.ModeDir | e.mode).String()
	}
	return e.mode.String()
}

// compareListing checks that a tool listed exactly the expected paths with
// the expected modes (mode "" when the tool shows none).
func compareListing(t *testing.T, tool string, got map[string]string, want map[string]treeEntry) {
	t.Helper()
	for _, p := range sortedKeys(got) {
		w, ok := want[p]
		if !ok {
			t.Errorf("%s lists unexpected %q", tool, p)
			continue
		}
		if got[p] != "" && got[p] != modeOf(w) {
			t.Errorf("%s: %q has mode %s, want %s", tool, p, got[p], modeOf(w))
		}
	}
	for _, p := range sortedKeys(want) {
		if _, ok := got[p]; !ok {
			t.Errorf("%s does not list %q", tool, p)
		}
	}
}

func TestBsdtar(t *testing.T) {
	bsdtar := testtools.Require(t, "bsdtar")
	// mode, links, uid, gid, size, month, day, year or time, name
	line := regexp.MustCompile(`^(\S+)\s+\d+\s+(\S+)\s+(\S+)\s+\d+\s+\S+\s+\d+\s+\S+\s(.*)$`)
	for _, fx := range fixtures() {
		t.Run(fx.name, func(t *testing.T) {
			img := writeImage(t, fx.build(t))
			want := expected(fx.files)
			got := map[string]string{}
			for _, l := range strings.Split(strings.TrimSpace(run(t, bsdtar, "-tvf", img)), "\n") {
				m := line.FindStringSubmatch(l)
				if m == nil {
					t.Fatalf("unparsed bsdtar line %q", l)
				}
				if m[2] != "0" || m[3] != "0" {
					t.Errorf("%q owned by %s:%s", m[4], m[2], m[3])
				}
				if m[4] != "." {
					got[m[4]] = m[1]
				}
			}
			compareListing(t, "bsdtar", got, want)

			dir := t.TempDir()
			makeRemovable(t, dir)
			run(t, bsdtar, "-xf", img, "-C", dir)
			checkExtracted(t, "bsdtar", dir, want)
		})
	}
}

func TestXorriso(t *testing.T) {
	xorriso := testtools.Require(t, "xorriso")
	line := regexp.MustCompile(`^(\S+)\s+\d+\s+(\S+)\s+(\S+)\s+\d+ .* '(/.*)'$`)
	for _, fx := range fixtures() {
		t.Run(fx.name, func(t *testing.T) {
			img := writeImage(t, fx.build(t))
			// -return_with WARNING makes any warning a non-zero exit.
			out := run(t, xorriso, "-return_with", "WARNING", "32", "-indev", img, "-find", "/", "-exec", "lsdl")
			for _, bad := range []string{"SORRY", "FAILURE", "WARNING", "FATAL", "MISHAP", "ABORT"} {
				if strings.Contains(out, bad) {
					t.Errorf("xorriso reports %s:\n%s", bad, out)
				}
			}
			if !strings.Contains(out, fmt.Sprintf("Volume id    : '%s'", fx.label)) {
				t.Errorf("xorriso does not see label %q:\n%s", fx.label, out)
			}
			got := map[string]string{}
			sc := bufio.NewScanner(strings.NewReader(out))
			for sc.Scan() {
				m := line.FindStringSubmatch(sc.Text())
				if m == nil {
					continue
				}
				if m[2] != "0" || m[3] != "0" {
					t.Errorf("%q owned by %s:%s", m[4], m[2], m[3])
				}
				if m[4] != "/" {
					got[strings.TrimPrefix(m[4], "/")] = m[1]
				}
			}
			compareListing(t, "xorriso", got, expected(fx.files))
		})
	}
}

// isoinfoListing parses "isoinfo -l" output into path -> mode.
func isoinfoListing(t *testing.T, out string, withMode bool) map[string]string {
	t.Helper()
	got := map[string]string{}
	dir := ""
	for _, l := range strings.Split(out, "\n") {
		if d, ok := strings.CutPrefix(l, "Directory listing of /"); ok {
			dir = d
			continue
		}
		_, name, ok := strings.Cut(l, "]  ")
		if !ok {
			continue
		}
		name = strings.TrimSuffix(name, " ")
		if name == "." || name == ".." {
			continue
		}
		mode := ""
		if withMode {
			mode = strings.Fields(l)[0]
		}
		got[dir+name] = mode
	}
	return got
}

func TestIsoinfo(t *testing.T) {
	isoinfo := testtools.Require(t, "isoinfo")
	for _, fx := range fixtures() {
		t.Run(fx.name, func(t *testing.T) {
			img := writeImage(t, fx.build(t))
			want := expected(fx.files)

			d := run(t, isoinfo, "-d", "-i", img)
			for _, s := range []string{
				"Volume id: " + fx.label + "\n",
				"Logical block size is: 2048\n",
				"Joliet with UCS level 3 found\n",
				"Rock Ridge signatures version 1 found\n",
			} {
				if !strings.Contains(d, s) {
					t.Errorf("isoinfo -d lacks %q:\n%s", s, d)
				}
			}

			compareListing(t, "isoinfo -R", isoinfoListing(t, run(t, isoinfo, "-R", "-l", "-i", img), true), want)

			// isoinfo cannot print Joliet names as UTF-8: ask for Latin-1,
			// in which it shows characters beyond U+00FF as '_'.
			latin1 := map[string]treeEntry{}
			for p, e := range want {
				latin1[strings.Map(func(r rune) rune {
					if r > 0xff {
						return '_'
					}
					return r
				}, p)] = e
			}
			out := run(t, isoinfo, "-J", "-j", "iso8859-1", "-l", "-i", img)
			var utf8Out strings.Builder
			for _, b := range []byte(out) {
				utf8Out.WriteRune(rune(b))
			}
			compareListing(t, "isoinfo -J", isoinfoListing(t, utf8Out.String(), false), latin1)

			// Without extensions: valid, unique, upper-case 8.3 names.
			plain := isoinfoListing(t, run(t, isoinfo, "-l", "-i", img), false)
			id := regexp.MustCompile(`^([A-Z0-9_]{1,8}/)*([A-Z0-9_]{1,8}\.[A-Z0-9_]{0,3};1|[A-Z0-9_]{1,8})$`)
			for p := range plain {
				if !id.MatchString(p) {
					t.Errorf("primary name %q is not level-1 style", p)
				}
			}
			if len(plain) != len(want) {
				t.Errorf("primary tree has %d entries, want %d", len(plain), len(want))
			}
		})
	}
}

func Test7z(t *testing.T) {
	sevenz := testtools.Require(t, "7z")
	for _, fx := range fixtures() {
		t.Run(fx.name, func(t *testing.T) {
			img := writeImage(t, fx.build(t))
			want := expected(fx.files)
			out := run(t, sevenz, "l", "-slt", img)
			_, entries, ok := strings.Cut(out, "\n----------\n")
			if !ok {
				t.Fatalf("unexpected 7z output:\n%s", out)
			}
			if strings.Contains(out, "ERRORS") || strings.Contains(out, "WARNINGS") {
				t.Errorf("7z reports problems:\n%s", out)
			}
			got := map[string]string{}
			for _, l := range strings.Split(entries, "\n") {
				if p, ok := strings.CutPrefix(l, "Path = "); ok {
					got[p] = ""
				}
			}
			compareListing(t, "7z l", got, want)

			dir := t.TempDir()
			makeRemovable(t, dir)
			run(t, sevenz, "x", "-y", "-o"+dir, img)
			checkExtracted(t, "7z x", dir, want)
		})
	}
}

func TestBlkid(t *testing.T) {
	blkid := testtools.Require(t, "blkid")
	probe := func(img string) map[string]string {
		m := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(run(t, blkid, "-p", "-o", "export", img)), "\n") {
			k, v, _ := strings.Cut(l, "=")
			m[k] = v
		}
		return m
	}
	for _, fx := range fixtures() {
		t.Run(fx.name, func(t *testing.T) {
			m := probe(writeImage(t, fx.build(t)))
			if m["TYPE"] != "iso9660" || m["LABEL"] != fx.label || m["UUID"] != "2024-05-06-07-08-09-00" {
				t.Errorf("blkid: %v", m)
			}
		})
	}
	// The UUID follows ModTime and nothing else.
	seed := Options{Label: "cidata"}
	a := probe(writeImage(t, build(t, seed, nocloudFiles())))
	b := probe(writeImage(t, build(t, seed, nocloudFiles())))
	if a["UUID"] != "1970-01-01-00-00-00-00" || a["UUID"] != b["UUID"] || a["LABEL"] != "cidata" {
		t.Errorf("blkid: %v and %v", a, b)
	}
}
