//go:build !unix

package serve

import (
	"errors"
	"log/slog"

	"github.com/vminit/vminit/mdserver/registry"
)

// openDir: the directory store reads with openat and fstatat, which
// Windows lacks.
func openDir(StoreConfig, registry.Checks, *slog.Logger) (Store, error) {
	return nil, errors.New("serve: a directory of instances (--instances) needs Linux, macOS or another Unix; on Windows use vminit-server --etcd-endpoints, or --kubernetes")
}
