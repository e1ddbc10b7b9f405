package iso9660

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// BenchmarkNoCloudSeed builds the 3-file NoCloud seed that cloud-localds
// writes with genisoimage (bench/iso/run.sh times both: docs/benchmarks.md).
// The readers are reset rather than reallocated so that allocs/op counts
// the package's own allocations.
func BenchmarkNoCloudSeed(b *testing.B) {
	files := nocloudFiles()
	readers := make([]*strings.Reader, len(files))
	for i := range readers {
		readers[i] = strings.NewReader("")
	}
	run := func(b *testing.B, dst func() io.Writer) {
		b.ReportAllocs()
		var size int
		for b.Loop() {
			out := dst()
			w := NewWriter(out, Options{Label: "cidata", ModTime: testTime})
			for i, f := range files {
				readers[i].Reset(f.data)
				if err := w.AddFile(f.name, int64(len(f.data)), 0o644, readers[i]); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			if bb, ok := out.(*bytes.Buffer); ok {
				size = bb.Len()
			}
		}
		if size > 0 {
			b.ReportMetric(float64(size), "image-bytes")
		}
	}
	b.Run("Buffer", func(b *testing.B) {
		var buf bytes.Buffer
		run(b, func() io.Writer { buf.Reset(); return &buf })
	})
	b.Run("Discard", func(b *testing.B) {
		run(b, func() io.Writer { return io.Discard })
	})
}

// BenchmarkStream64MiB streams one 64 MiB file to io.Discard: the cost of
// moving data through the writer, since layout is negligible.
func BenchmarkStream64MiB(b *testing.B) {
	const size = 64 << 20
	data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	r := bytes.NewReader(data)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(data)
		w := NewWriter(io.Discard, Options{Label: "big"})
		if err := w.AddFile("big.bin", size, 0o644, r); err != nil {
			b.Fatal(err)
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
