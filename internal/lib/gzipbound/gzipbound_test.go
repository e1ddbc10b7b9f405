package gzipbound

import (
	"bytes"
	"compress/gzip"
	"errors"
	"strings"
	"testing"
)

func zip(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestDecompress: data up to the limit decompresses whole; one byte more is an
// error naming the limit, never a shortened result; what is not gzip, or
// is cut short, is an error.
func TestDecompress(t *testing.T) {
	const limit = 1000
	atLimit := bytes.Repeat([]byte("a"), limit)
	if got, err := Decompress(zip(t, atLimit), limit); err != nil || !bytes.Equal(got, atLimit) {
		t.Errorf("at the limit: %d bytes, %v", len(got), err)
	}
	got, err := Decompress(zip(t, append(atLimit, 'b')), limit)
	if !errors.Is(err, ErrTooLarge) || got != nil || !strings.Contains(err.Error(), "more than 1000 bytes") {
		t.Errorf("past the limit: %d bytes, %v", len(got), err)
	}
	if _, err := Decompress([]byte("#cloud-config\n"), limit); err == nil || !strings.Contains(err.Error(), "not gzip") {
		t.Errorf("not gzip: %v", err)
	}
	z := zip(t, atLimit)
	if _, err := Decompress(z[:len(z)-4], limit); err == nil || errors.Is(err, ErrTooLarge) {
		t.Errorf("cut short: %v", err)
	}
}

func TestIsGzip(t *testing.T) {
	for in, want := range map[string]bool{"": false, "\x1f": false, "\x1f\x8b": true, "#cloud-config": false} {
		if IsGzip([]byte(in)) != want {
			t.Errorf("IsGzip(%q) = %v", in, !want)
		}
	}
}
