//go:build !linux

package nodecmd

import (
	"context"
	"errors"
)

// watchDir has no notification outside Linux: the caller's poll alone
// follows the directory.
func watchDir(context.Context, string) (<-chan struct{}, error) {
	return nil, errors.ErrUnsupported
}
