// Package gzipbound decompresses gzip data held in memory, bounded: the one
// contract every reader of gzip user data, file content or bootstrap data
// in vminit shares (as Ignition keeps one util/unzip.go).
//
// Decompressed data past the caller's limit is an error naming the limit,
// never a silently shortened result: a truncated file or script would
// otherwise reach a guest as if it were whole. Data that is not gzip, or
// is cut short, is an error too; callers that, like cloud-init, pass
// through what does not decompress decide that themselves (IsGzip).
package gzipbound

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
)

// ErrTooLarge is the error Decompress wraps when the data decompresses to more
// than its limit.
var ErrTooLarge = errors.New("too large")

// IsGzip reports whether data starts with gzip's magic number, as
// cloud-init's util.decomp_gzip and KubeVirt look for it.
func IsGzip(data []byte) bool {
	return len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b
}

// Decompress decompresses data (every gzip member of it) to at most limit
// bytes. It reads at most limit+1 bytes of output, so hostile data costs
// no more memory than the limit.
func Decompress(data []byte, limit int) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("not gzip: %w", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	if len(out) > limit {
		return nil, fmt.Errorf("%w: it decompresses to more than %d bytes, the limit", ErrTooLarge, limit)
	}
	return out, nil
}
