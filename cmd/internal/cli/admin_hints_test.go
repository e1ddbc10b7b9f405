package cli

import (
	"io"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/admin"
	"github.com/vminit/vminit/mdserver/dirstore"
)

// TestAdminServerHints walks the wrong --server a first hour meets:
// the guests' port, http:// to an HTTPS listener, https:// to
// a plain one, a self-signed certificate without --ca-file. Each error
// names the flag to change, not only a 404 or the TLS stack's words.
func TestAdminServerHints(t *testing.T) {
	dir, work := t.TempDir(), t.TempDir()
	quiet := slog.New(slog.DiscardHandler)
	store, err := dirstore.Open(dir, dirstore.Options{NoWatch: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	const token = "hints-test-token-0123456789"
	tokenFile := filepath.Join(work, "token")
	os.WriteFile(tokenFile, []byte(token+"\n"), 0o600)
	t.Setenv("VMINIT_ADMIN_URL", "")
	t.Setenv("VMINIT_ADMIN_TOKEN", "")
	guests := httptest.NewServer(mdserver.NewHandler(store, mdserver.Options{Logger: quiet}))
	defer guests.Close()
	plain := httptest.NewServer(admin.NewHandler(store, admin.Options{Token: token, Logger: quiet}))
	defer plain.Close()
	tlsSrv := httptest.NewUnstartedServer(admin.NewHandler(store, admin.Options{Token: token, Logger: quiet}))
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes the test fails on purpose
	tlsSrv.StartTLS()
	defer tlsSrv.Close()

	for _, tc := range []struct{ what, server, want string }{
		{"the guests' port", guests.URL, "is not an admin listener: /v1/instances answered 404 as serve's guests' --listen does; give the address of serve's --admin-listen"},
		{"http:// to HTTPS", "http://" + strings.TrimPrefix(tlsSrv.URL, "https://"), "that listener speaks HTTPS: give --server https://"},
		{"https:// to HTTP", "https://" + strings.TrimPrefix(plain.URL, "http://"), "that listener speaks plain HTTP: give --server http://"},
		{"self-signed without --ca-file", tlsSrv.URL, "give --ca-file with the CA that signed serve's --admin-tls-cert"},
	} {
		code, _, stderr := run(t, "instances", "list", "--server", tc.server, "--token-file", tokenFile)
		if code != ExitInvalid || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d\n%s\nwant %q", tc.what, code, stderr, tc.want)
		}
	}
	if code, stdout, _ := run(t, "instances", "list", "--server", plain.URL, "--token-file", tokenFile); code != ExitOK || !strings.HasPrefix(stdout, "NAME") {
		t.Errorf("the admin listener: %d %s", code, stdout)
	}

	// --token-file's help: the variable holds the token, not a path.
	_, help, _ := run(t, "instances", "--help")
	if line := helpLine(help, "--token-file"); strings.Contains(line, "(default $VMINIT_ADMIN_TOKEN)") || !strings.Contains(line, "the token itself in $VMINIT_ADMIN_TOKEN") {
		t.Errorf("--token-file's help: %s", line)
	}
}

// helpLine is the line of a help text that describes flag.
func helpLine(help, flag string) string {
	for l := range strings.Lines(help) {
		if strings.HasPrefix(strings.TrimSpace(l), flag+" ") {
			return l
		}
	}
	return ""
}
