package cli

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDocsGuestImages: docs/run.md's "A guest image" names the official
// Debian and Ubuntu cloud images, each with its publisher's checksum file
// from the same directory, and its commands work as written. The machine
// has no outbound network, so the downloads are stand-ins: the checksum
// commands run, as written, on a stand-in image and a checksum file of
// the publisher's format listing it among others (which --ignore-missing
// skips); they pass, and fail once the image is corrupted. Each block's
// `vminit run` boots the image it downloaded.
func TestDocsGuestImages(t *testing.T) {
	blocks := guestImageBlocks(t)
	hosts := map[string]bool{}
	for _, b := range blocks {
		var image, sums, check, runImage string
		for _, l := range b {
			switch f := strings.Fields(l); {
			case len(f) == 3 && f[0] == "curl" && f[1] == "-fLO":
				u, err := url.Parse(f[2])
				if err != nil || u.Scheme != "https" {
					t.Fatalf("%q: want an https URL", l)
				}
				hosts[u.Host] = true
				if name := path.Base(u.Path); strings.HasPrefix(name, "SHA") {
					sums = f[2]
				} else {
					image = f[2]
				}
			case len(f) > 0 && strings.HasSuffix(f[0], "sum"):
				check = l
			case len(f) > 0 && f[0] == "vminit":
				if i := slices.Index(f, "--image"); i > 0 && i+1 < len(f) {
					runImage = f[i+1]
				}
			}
		}
		if image == "" || sums == "" || check == "" {
			t.Fatalf("a block without an image, its checksum file and the check:\n%s", strings.Join(b, "\n"))
		}
		if path.Dir(image) != path.Dir(sums) {
			t.Errorf("%s: the checksum file %s is not the image's directory's", image, sums)
		}
		name := path.Base(image)
		if runImage != name {
			t.Errorf("the block downloads %s and runs --image %q", name, runImage)
		}
		checkDocumentedChecksum(t, name, path.Base(sums), check)
	}
	for _, h := range []string{"cloud.debian.org", "cloud-images.ubuntu.com"} {
		if !hosts[h] {
			t.Errorf("no image from %s (have %v)", h, hosts)
		}
	}
}

// guestImageBlocks returns the lines of each sh block of docs/run.md's
// "A guest image" section.
func guestImageBlocks(t *testing.T) [][]string {
	data, err := os.ReadFile(filepath.Join(repoRoot, "docs", "run.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(data), "\n## A guest image\n")
	if !ok {
		t.Fatal(`docs/run.md has no "## A guest image" section`)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	var blocks [][]string
	for _, part := range strings.Split(sec, "```sh\n")[1:] {
		body, _, _ := strings.Cut(part, "```")
		var lines []string
		for l := range strings.Lines(body) {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
		blocks = append(blocks, lines)
	}
	if len(blocks) < 2 {
		t.Fatalf("%d blocks in docs/run.md's \"A guest image\", want Debian's and Ubuntu's", len(blocks))
	}
	return blocks
}

// checkDocumentedChecksum runs the documented check line in a directory
// holding a stand-in image and a checksum file as its publisher writes it
// (Debian "HASH  NAME", Ubuntu "HASH *NAME"), listing another image too.
func checkDocumentedChecksum(t *testing.T, image, sums, line string) {
	argv := strings.Fields(line)
	if _, err := exec.LookPath(argv[0]); err != nil {
		t.Skipf("%s: %v", argv[0], err)
	}
	var sum func([]byte) string
	switch sums {
	case "SHA512SUMS":
		sum = func(b []byte) string { h := sha512.Sum512(b); return hex.EncodeToString(h[:]) }
	case "SHA256SUMS":
		sum = func(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }
	default:
		t.Fatalf("checksum file %s: want SHA512SUMS or SHA256SUMS", sums)
	}
	sep := "  "
	if strings.Contains(line, "sha256sum") {
		sep = " *"
	}
	dir := t.TempDir()
	content := []byte("a stand-in for " + image)
	list := sum([]byte("another image")) + sep + "other-image.qcow2\n" + sum(content) + sep + image + "\n"
	if err := os.WriteFile(filepath.Join(dir, sums), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(data []byte) (string, error) {
		if err := os.WriteFile(filepath.Join(dir, image), data, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := check(content); err != nil || !strings.Contains(out, image+": OK") {
		t.Errorf("%s on the image as listed: %v\n%s", line, err, out)
	}
	if out, err := check([]byte("corrupted")); err == nil {
		t.Errorf("%s passed a corrupted image:\n%s", line, out)
	}
}
