package vfat

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"testing"
	"testing/iotest"
)

// smallImage is a FAT12 image with 512-byte clusters, small enough for fuzz
// seeds: two files of two clusters each and a nested directory.
func smallImage(t testing.TB) []byte {
	t.Helper()
	return buildImage(t, Options{Label: "cidata", Size: 24576}, []entry{
		{name: "user-data", content: pattern(600, 1)},
		{name: "meta-data", content: pattern(700, 2)},
		{name: "a/b/c.txt", content: []byte("c\n")},
	})
}

// dirEntryAt finds the 8.3 entry with the given 11-byte name.
func dirEntryAt(t testing.TB, img []byte, short string) int {
	t.Helper()
	i := bytes.Index(img, []byte(short))
	if i < 0 || i%32 != 0 {
		t.Fatalf("entry %q not found", short)
	}
	return i
}

func firstCluster(img []byte, entry int) uint32 {
	return uint32(binary.LittleEndian.Uint16(img[entry+26:]))
}

// setFAT12 patches FAT entry n in the first FAT (the one the reader uses).
func setFAT12(img []byte, n, v uint32) {
	off := sectorSize + int(n+n/2)
	if n&1 == 0 {
		img[off] = byte(v)
		img[off+1] = img[off+1]&0xF0 | byte(v>>8)&0x0F
	} else {
		img[off] = img[off]&0x0F | byte(v<<4)
		img[off+1] = byte(v >> 4)
	}
}

func TestReaderRejectsCorruption(t *testing.T) {
	base := smallImage(t)
	if _, err := NewReader(bytes.NewReader(base), int64(len(base))); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		mutate func([]byte) []byte
	}{
		{"boot signature", func(b []byte) []byte { b[510] = 0; return b }},
		{"sector size", func(b []byte) []byte { b[11], b[12] = 0, 3; return b }},
		{"cluster size", func(b []byte) []byte { b[13] = 3; return b }},
		{"no FATs", func(b []byte) []byte { b[16] = 0; return b }},
		{"FAT32", func(b []byte) []byte { b[17], b[18] = 0, 0; return b }},
		{"FAT too small", func(b []byte) []byte {
			// Claim 2000 sectors: a 1-sector FAT maps only 341 clusters.
			binary.LittleEndian.PutUint16(b[19:], 2000)
			return append(b, make([]byte, 2000*sectorSize-len(b))...)
		}},
		{"volume beyond image", func(b []byte) []byte { return b[:len(b)-4096] }},
		{"chain loop", func(b []byte) []byte {
			c := firstCluster(b, dirEntryAt(t, b, "USER-D~1   "))
			setFAT12(b, c+1, c)
			return b
		}},
		{"chain to free cluster", func(b []byte) []byte {
			c := firstCluster(b, dirEntryAt(t, b, "USER-D~1   "))
			setFAT12(b, c, 0)
			return b
		}},
		{"chain out of range", func(b []byte) []byte {
			c := firstCluster(b, dirEntryAt(t, b, "USER-D~1   "))
			setFAT12(b, c, 0xFF0)
			return b
		}},
		{"cross-linked files", func(b []byte) []byte {
			u := dirEntryAt(t, b, "USER-D~1   ")
			m := dirEntryAt(t, b, "META-D~1   ")
			copy(b[m+26:m+28], b[u+26:u+28])
			return b
		}},
		{"size beyond chain", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[dirEntryAt(t, b, "USER-D~1   ")+28:], 5000)
			return b
		}},
		{"size short of chain", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[dirEntryAt(t, b, "USER-D~1   ")+28:], 100)
			return b
		}},
		{"directory loop", func(b []byte) []byte {
			// a/b points back at a's own cluster.
			a := firstCluster(b, dirEntryAt(t, b, "A          "))
			bb := dirEntryAt(t, b, "B          ")
			binary.LittleEndian.PutUint16(b[bb+26:], uint16(a))
			return b
		}},
		{"directory without cluster", func(b []byte) []byte {
			binary.LittleEndian.PutUint16(b[dirEntryAt(t, b, "A          ")+26:], 0)
			return b
		}},
		{"empty file with cluster", func(b []byte) []byte {
			e := dirEntryAt(t, b, "USER-D~1   ")
			binary.LittleEndian.PutUint32(b[e+28:], 0)
			return b
		}},
		{"slash in name", func(b []byte) []byte {
			// Break the LFN checksum so the 8.3 name is used, then put a
			// slash in it.
			e := dirEntryAt(t, b, "USER-D~1   ")
			b[e-32+13] ^= 0xFF
			b[e+1] = '/'
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.mutate(bytes.Clone(base))
			_, err := NewReader(bytes.NewReader(b), int64(len(b)))
			if !errors.Is(err, ErrFormat) {
				t.Errorf("got %v, want ErrFormat", err)
			}
		})
	}
}

func TestReaderIOErrors(t *testing.T) {
	b := smallImage(t)
	// A ReaderAt shorter than the size it claims.
	if _, err := NewReader(bytes.NewReader(b[:8192]), int64(len(b))); err == nil {
		t.Error("short ReaderAt accepted")
	}
	if _, err := NewReader(bytes.NewReader(b[:100]), 100); !errors.Is(err, ErrFormat) {
		t.Errorf("100-byte image: %v", err)
	}
	// OneByteReader-style short reads are still full reads.
	im, err := NewReader(readerAtFunc(func(p []byte, off int64) (int, error) {
		return bytes.NewReader(b).ReadAt(p, off)
	}), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	f, err := im.Open("user-data")
	if err != nil {
		t.Fatal(err)
	}
	if err := iotest.TestReader(f.(io.Reader), pattern(600, 1)); err != nil {
		t.Error(err)
	}
}

type readerAtFunc func([]byte, int64) (int, error)

func (f readerAtFunc) ReadAt(p []byte, off int64) (int, error) { return f(p, off) }

func TestReaderLFNFallbacks(t *testing.T) {
	base := smallImage(t)
	// A broken LFN checksum: the 8.3 name is used, as every driver does.
	b := bytes.Clone(base)
	e := dirEntryAt(t, b, "USER-D~1   ")
	b[e-32+13] ^= 0xFF
	im, err := NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := im.Stat("USER-D~1"); err != nil {
		t.Errorf("8.3 fallback: %v", err)
	}
	// An extra LFN part with sequence number 0 after a complete set (0x20
	// is not an end or deleted marker) is ignored, not indexed.
	b = bytes.Clone(base)
	e = dirEntryAt(t, b, "USER-D~1   ")
	copy(b[e:e+32], b[e-32:e])
	b[e] = 0x20
	// The 8.3 entry it replaced is gone, so the image is damaged anyway;
	// what matters is that Open does not panic.
	_, _ = NewReader(bytes.NewReader(b), int64(len(b)))
	// NT lower-case flags on a plain 8.3 entry.
	b = bytes.Clone(base)
	e = dirEntryAt(t, b, "A          ")
	b[e+12] = 0x08
	im, err = NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := im.Stat("a"); err != nil || !st.IsDir() {
		t.Errorf("lower-case flag: %v", err)
	}
	if _, err := fs.ReadFile(im, "a/b/c.txt"); err != nil {
		t.Error(err)
	}
}
