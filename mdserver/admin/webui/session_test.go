package webui_test

import (
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/lib/tlsfiles"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/mdserver/admin"
	"github.com/vminit/vminit/mdserver/admin/webui"
)

// postLogout posts the logout form as the page would, with cookie.
func postLogout(t *testing.T, c *http.Client, srv *httptest.Server, cookie string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ui/logout", nil)
	req.Header.Set("Origin", srv.URL)
	req.Header.Set("Cookie", cookie)
	return do(t, c, req)
}

// TestLogoutEndsSession: after a logout, the session's cookie — copied
// before, and sent again — is refused; another session goes on.
func TestLogoutEndsSession(t *testing.T) {
	f := showcase(t)
	srv := httptest.NewServer(f.ui(webui.Options{}))
	t.Cleanup(srv.Close)
	c := noRedirect(srv)
	copied := sessionCookie(postLogin(t, c, srv, token, srv.URL))
	other := sessionCookie(postLogin(t, c, srv, token, srv.URL))
	if copied == "" || other == "" || copied == other {
		t.Fatalf("sessions %q and %q", copied, other)
	}
	if a := postLogout(t, c, srv, copied); a.status != http.StatusSeeOther || a.header.Get("Location") != "/ui/login" {
		t.Fatalf("logout: %d %q", a.status, a.header.Get("Location"))
	}
	if a := get(t, c, srv.URL+"/ui/", "Cookie", copied); a.status != http.StatusSeeOther {
		t.Errorf("the logged-out session's cookie, sent again: %d, want a redirect to the login", a.status)
	}
	if a := get(t, c, srv.URL+"/ui/stream", "Cookie", copied); a.status != http.StatusUnauthorized {
		t.Errorf("the logged-out session's cookie on the stream: %d", a.status)
	}
	if a := get(t, c, srv.URL+"/ui/", "Cookie", other); a.status != http.StatusOK {
		t.Errorf("another session after the logout: %d", a.status)
	}
}

// TestLogoutFloodEndsSessions: logouts past the bound of what a replica
// remembers end every session rather than forgetting one.
func TestLogoutFloodEndsSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("4,097 logins and logouts")
	}
	f := showcase(t)
	srv := httptest.NewServer(f.ui(webui.Options{}))
	t.Cleanup(srv.Close)
	c := noRedirect(srv)
	first := sessionCookie(postLogin(t, c, srv, token, srv.URL))
	postLogout(t, c, srv, first)
	kept := sessionCookie(postLogin(t, c, srv, token, srv.URL))
	for range 4096 {
		postLogout(t, c, srv, sessionCookie(postLogin(t, c, srv, token, srv.URL)))
	}
	if a := get(t, c, srv.URL+"/ui/", "Cookie", first); a.status != http.StatusSeeOther {
		t.Errorf("the first logged-out session after the flood: %d", a.status)
	}
	if a := get(t, c, srv.URL+"/ui/", "Cookie", kept); a.status != http.StatusSeeOther {
		t.Errorf("a session of before the flood: %d, want ended", a.status)
	}
	if a := get(t, c, srv.URL+"/ui/", "Cookie", sessionCookie(postLogin(t, c, srv, token, srv.URL))); a.status != http.StatusOK {
		t.Errorf("a new session after the flood: %d", a.status)
	}
}

// TestTokenFileRotated: the admin token file is re-read as the TLS files
// are: once it changes, the old token is refused by the API and its web
// sessions end, and the new one works, without a restart.
func TestTokenFileRotated(t *testing.T) {
	old := tlsfiles.Recheck
	tlsfiles.Recheck = 0
	t.Cleanup(func() { tlsfiles.Recheck = old })
	path := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := admin.WatchToken(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	f := showcase(t)
	srv := httptest.NewServer(admin.NewHandler(f.store, admin.Options{TokenFunc: tok, Metadata: f.md, Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)
	c := noRedirect(srv)
	cookie := sessionCookie(postLogin(t, c, srv, token, srv.URL))
	if a := get(t, c, srv.URL+"/ui/", "Cookie", cookie); a.status != http.StatusOK {
		t.Fatalf("the session: %d", a.status)
	}

	rotated := "rotated-token-0123456789abcdef"
	// A new file renamed over the old, as a Secret volume's update is.
	if err := os.WriteFile(path+".new", []byte(rotated), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	if a := get(t, c, srv.URL+"/v1/instances", "Authorization", "Bearer "+token); a.status != http.StatusUnauthorized {
		t.Errorf("the old token after rotation: %d", a.status)
	}
	if a := get(t, c, srv.URL+"/ui/", "Cookie", cookie); a.status != http.StatusSeeOther {
		t.Errorf("a session of the old token after rotation: %d", a.status)
	}
	if a := get(t, c, srv.URL+"/v1/instances", "Authorization", "Bearer "+rotated); a.status != http.StatusOK {
		t.Errorf("the new token: %d", a.status)
	}
	if a := postLogin(t, c, srv, rotated, srv.URL); sessionCookie(a) == "" {
		t.Errorf("a login with the new token: %d", a.status)
	}

	// A file that no longer loads (too short) keeps the token in force.
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if a := get(t, c, srv.URL+"/v1/instances", "Authorization", "Bearer "+rotated); a.status != http.StatusOK {
		t.Errorf("the token in force while the file does not load: %d", a.status)
	}
}

// count is how many times substr is in what logs holds.
func count(logs *testtools.SyncBuffer, substr string) int {
	return strings.Count(logs.String(), substr)
}

// TestLoginThrottled: a source's wrong tokens are answered at once five
// times, each closing the connection; then its tries are refused with 429
// and Retry-After before the token is looked at (the right one included),
// each waiting twice as long; the log has three lines for a hundred
// guesses, not a hundred. Another source is not held up.
func TestLoginThrottled(t *testing.T) {
	f := showcase(t)
	logs := &testtools.SyncBuffer{}
	srv := httptest.NewServer(f.ui(webui.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}))
	t.Cleanup(srv.Close)
	c := noRedirect(srv)
	for i := range 5 {
		a := postLogin(t, c, srv, "guess", srv.URL)
		if a.status != http.StatusUnauthorized || !a.closed {
			t.Fatalf("wrong token %d: %d, connection closed %v", i+1, a.status, a.closed)
		}
	}
	a := postLogin(t, c, srv, token, srv.URL)
	if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") != "1" || sessionCookie(a) != "" ||
		!strings.Contains(a.body, "Too many wrong tokens") {
		t.Fatalf("the right token while throttled: %d, Retry-After %q, cookie %q", a.status, a.header.Get("Retry-After"), sessionCookie(a))
	}
	f.clock.Advance(time.Second)
	if a := postLogin(t, c, srv, "guess", srv.URL); a.status != http.StatusUnauthorized {
		t.Fatalf("a guess after the wait: %d", a.status)
	}
	if a := postLogin(t, c, srv, "guess", srv.URL); a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") != "2" {
		t.Errorf("the next guess: %d, Retry-After %q, want 429 and 2 s", a.status, a.header.Get("Retry-After"))
	}
	for range 100 {
		postLogin(t, c, srv, "guess", srv.URL)
	}
	if n := count(logs, "level=WARN"); n != 2 {
		t.Errorf("%d warnings for 107 wrong tries, want 2 (the first miss, the throttling):\n%s", n, logs.String())
	}

	// Another source (a client bound to another loopback address) is not
	// throttled by the first one's guesses.
	oc := noRedirect(srv)
	oc.Transport = &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}
	if a := postLogin(t, oc, srv, token, srv.URL); sessionCookie(a) == "" {
		t.Errorf("a login from another address: %d", a.status)
	}

	// Quiet for long enough, the source is forgotten, with a count.
	f.clock.Advance(time.Hour)
	if a := postLogin(t, c, srv, token, srv.URL); sessionCookie(a) == "" {
		t.Errorf("a login after an hour's quiet: %d", a.status)
	}
	if n := count(logs, "refusedWhileThrottled=102"); n != 1 {
		t.Errorf("no count of the refused tries when the source was forgotten:\n%s", logs.String())
	}
}
