//go:build unix

package dirstore_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/vminit/vminit/mdserver/dirstore"
)

// A directory of spec files, one instance per file, served from memory.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "instances")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	spec := "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: web-1}\nspec:\n  metadataServer: {addresses: [10.0.0.1]}\n"
	if err := os.WriteFile(filepath.Join(dir, "web-1.yaml"), []byte(spec), 0o600); err != nil {
		panic(err)
	}
	// NoWatch: read once; without it, changes to the directory are picked
	// up as they happen.
	store, err := dirstore.Open(dir, dirstore.Options{NoWatch: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	rec, _ := store.Snapshot().ByName("web-1")
	fmt.Println(rec.Name, rec.Addresses, rec.Instance().Spec.Hostname)
	// Output: web-1 [10.0.0.1] web-1
}
