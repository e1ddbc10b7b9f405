// Package iso holds benchmarks that compare vminit's ISO 9660 writer with
// other ways of building the same cloud-init seed; run.sh drives them.
// They live outside the iso9660 package so that its fuzzing binary does not
// carry (and instrument) go-diskfs.
package iso

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/diskfs/go-diskfs/backend/file"
	diskfs "github.com/diskfs/go-diskfs/filesystem/iso9660"

	"github.com/vminit/vminit/iso9660"
)

// The seed both benchmarks build: the three NoCloud files, about 100 bytes
// each, as cloud-localds would get them.
var seed = []struct{ name, data string }{
	{"user-data", "#cloud-config\nhostname: seed\nssh_authorized_keys:\n  - ssh-ed25519 AAAA test\n"},
	{"meta-data", "instance-id: iid-local01\nlocal-hostname: seed\n"},
	{"network-config", "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n"},
}

// BenchmarkVminitNoCloudSeed is iso9660.BenchmarkNoCloudSeed/Buffer with
// fresh readers, as a caller would write it.
func BenchmarkVminitNoCloudSeed(b *testing.B) {
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		w := iso9660.NewWriter(&buf, iso9660.Options{Label: "cidata", ModTime: time.Unix(0, 0)})
		for _, f := range seed {
			if err := w.AddFile(f.name, int64(len(f.data)), 0o644, strings.NewReader(f.data)); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "image-bytes")
}

// BenchmarkGoDiskfsNoCloudSeed builds the same seed with go-diskfs v1.9.4
// (Rock Ridge and Joliet), the library vminit's writer replaces (why:
// docs/design.md). go-diskfs stages every file in an on-disk workspace; the
// output image lives in a different directory, because a workspace that
// contains the image would be copied into itself.
func BenchmarkGoDiskfsNoCloudSeed(b *testing.B) {
	wsRoot := b.TempDir()
	out := filepath.Join(b.TempDir(), "seed.iso")
	b.ReportAllocs()
	var size int64
	for b.Loop() {
		ws, err := os.MkdirTemp(wsRoot, "ws")
		if err != nil {
			b.Fatal(err)
		}
		f, err := os.Create(out)
		if err != nil {
			b.Fatal(err)
		}
		fsys, err := diskfs.Create(file.New(f, false), 0, 0, 2048, ws)
		if err != nil {
			b.Fatal(err)
		}
		for _, sf := range seed {
			h, err := fsys.OpenFile("/"+sf.name, os.O_CREATE|os.O_RDWR)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := h.Write([]byte(sf.data)); err != nil {
				b.Fatal(err)
			}
			h.Close()
		}
		if err := fsys.Finalize(diskfs.FinalizeOptions{RockRidge: true, Joliet: true, VolumeIdentifier: "cidata"}); err != nil {
			b.Fatal(err)
		}
		st, err := f.Stat()
		if err != nil {
			b.Fatal(err)
		}
		size = st.Size()
		f.Close()
		os.RemoveAll(ws) // Finalize removes it too; be sure
	}
	b.ReportMetric(float64(size), "image-bytes")
}
