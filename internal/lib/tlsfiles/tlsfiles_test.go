package tlsfiles

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/testtools"
)

// TestWatch reloads a pair of files whose load fails while they disagree,
// as a certificate and its key do while a renewal is half written.
func TestWatch(t *testing.T) {
	old := Recheck
	Recheck = 0
	t.Cleanup(func() { Recheck = old })
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	write := func(p, s string) {
		if err := os.WriteFile(p+".tmp", []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".tmp", p); err != nil { // a new inode, as Secret volumes and certbot give
			t.Fatal(err)
		}
	}
	loads := 0
	load := func() (string, error) {
		loads++
		x, _ := os.ReadFile(a)
		y, _ := os.ReadFile(b)
		if string(x) != string(y) {
			return "", errors.New("a and b differ")
		}
		return string(x), nil
	}
	write(a, "one")
	write(b, "one")
	logs := &testtools.SyncBuffer{}
	w, err := Watch("pair", slog.New(slog.NewTextHandler(logs, nil)), load, a, b, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Get(); got != "one" || loads != 1 {
		t.Errorf("Get = %q after %d loads; want one, unchanged files not re-read", got, loads)
	}
	write(a, "two")
	for range 3 {
		if got := w.Get(); got != "one" {
			t.Errorf("half-renewed: Get = %q, want the previous one", got)
		}
	}
	if n := strings.Count(logs.String(), "do not load"); n != 1 {
		t.Errorf("%d error lines for one bad set:\n%s", n, logs)
	}
	write(b, "two")
	if got := w.Get(); got != "two" || !strings.Contains(logs.String(), "files reloaded") {
		t.Errorf("renewed: Get = %q; log:\n%s", got, logs)
	}
	if _, err := Watch("missing", nil, load, filepath.Join(dir, "none")); err != nil {
		t.Errorf("Watch returns load's error only: %v", err)
	}
	if _, err := Watch("bad", nil, func() (int, error) { return 0, errors.New("no") }); err == nil {
		t.Error("Watch hid load's error")
	}
}
