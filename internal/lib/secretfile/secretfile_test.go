package secretfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSecretFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if k, err := Key(write("key", "  0123456789abcdef\n"), "key", 16); err != nil || k != "0123456789abcdef" {
		t.Errorf("Key = %q, %v", k, err)
	}
	if _, err := Key(write("short", "abc\n"), "HMAC key", 16); err == nil || !strings.Contains(err.Error(), "the HMAC key is 3 bytes; use at least 16") {
		t.Errorf("a short key: %v", err)
	}
	if p, err := Password(write("pw", " pass word \r\n")); err != nil || p != " pass word " {
		t.Errorf("Password = %q, %v", p, err)
	}
	if _, err := Key(filepath.Join(dir, "missing"), "key", 0); !os.IsNotExist(err) {
		t.Errorf("a missing file: %v", err)
	}
}
