package webui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A browser navigating cannot send the admin API's bearer header, so the
// login form takes the admin token once and answers with a session
// cookie: "v2.<expiry in Unix seconds>.<session id>.<HMAC-SHA256 of the
// three>", keyed with a key derived from the token in force. A session is
// valid on every replica that has the same token, until it expires, and
// a new token (the token file re-read) ends every session at once. A
// logout ends its own session on the replica that took it (revoked, by
// its id, until it would have expired); the other replicas learn of no
// logout: rotating the token ends a session everywhere. The cookie is
// HttpOnly (no script reads it), SameSite=Strict (no other site's page
// sends it), Secure over TLS, and scoped to /ui/: the admin API itself
// still takes only the bearer header.

const (
	cookieName     = "vminit_ui_session"
	sessionVersion = "v2"
	// maxLoginBody bounds the login form's body: one token.
	maxLoginBody = 4 << 10
	// maxRevoked bounds the logouts remembered until their sessions'
	// expiry. A flood of logins and logouts past it ends every session
	// of this replica instead (sessions.generation), which forgets them.
	maxRevoked = 4096
)

// sessions signs and checks session cookies, and remembers logouts.
type sessions struct {
	token func() string
	now   func() time.Time

	mu         sync.Mutex
	keyOf      string // the token key was derived from
	key        []byte
	generation uint64               // bumped when the revoked set overflows
	revoked    map[string]time.Time // session id → its expiry
}

// sessionKey derives the sessions' key from the admin token and the
// replica's generation of sessions; nil for no token (no session is ever
// valid).
func sessionKey(token string, generation uint64) []byte {
	if token == "" {
		return nil
	}
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("vminit webui session key"))
	if generation > 0 {
		m.Write([]byte(strconv.FormatUint(generation, 10)))
	}
	return m.Sum(nil)
}

// currentKey is the key of the token in force, derived again when the
// token changed. s.mu is held.
func (s *sessions) currentKey() []byte {
	tok := s.token()
	if tok != s.keyOf || s.key == nil {
		s.keyOf, s.key = tok, sessionKey(tok, s.generation)
	}
	return s.key
}

func mac(key []byte, payload string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// issue returns a new session's cookie value, expiring at exp; "" when
// no token is in force.
func (s *sessions) issue(exp time.Time) string {
	var id [16]byte
	rand.Read(id[:])
	payload := sessionVersion + "." + strconv.FormatInt(exp.Unix(), 10) + "." + base64.RawURLEncoding.EncodeToString(id[:])
	s.mu.Lock()
	key := s.currentKey()
	s.mu.Unlock()
	if key == nil {
		return ""
	}
	return payload + "." + base64.RawURLEncoding.EncodeToString(mac(key, payload))
}

// check returns the id and expiry of v when it is a session signed with
// the key in force that has neither expired nor been logged out.
func (s *sessions) check(v string) (id string, exp time.Time, ok bool) {
	i := strings.LastIndexByte(v, '.')
	if i < 0 {
		return "", time.Time{}, false
	}
	payload, sig := v[:i], v[i+1:]
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return "", time.Time{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := s.currentKey()
	if key == nil || !hmac.Equal(got, mac(key, payload)) {
		return "", time.Time{}, false
	}
	parts := strings.Split(payload, ".")
	if len(parts) != 3 || parts[0] != sessionVersion {
		return "", time.Time{}, false
	}
	unix, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return "", time.Time{}, false
	}
	exp, id = time.Unix(unix, 0), parts[2]
	if _, out := s.revoked[id]; out || !s.now().Before(exp) {
		return "", time.Time{}, false
	}
	return id, exp, true
}

// revoke ends the session id (expiring at exp) on this replica. When the
// set of revoked sessions is full of unexpired ones, every session of
// this replica ends instead: its key changes, and the set is emptied.
func (s *sessions) revoke(id string, exp time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.revoked == nil {
		s.revoked = map[string]time.Time{}
	}
	if len(s.revoked) >= maxRevoked {
		now := s.now()
		for k, e := range s.revoked {
			if !now.Before(e) {
				delete(s.revoked, k)
			}
		}
	}
	if len(s.revoked) >= maxRevoked {
		s.generation++
		s.key = nil
		clear(s.revoked)
		return
	}
	s.revoked[id] = exp
}

// authorized: the bearer header (as the admin API takes it) or a valid
// session cookie.
func (u *UI) authorized(r *http.Request) bool {
	if u.opts.Bearer != nil && u.opts.Bearer(r) {
		return true
	}
	c, err := r.Cookie(cookieName)
	if err != nil {
		return false
	}
	_, _, ok := u.sessions.check(c.Value)
	return ok
}

// tokenMatches compares hashes, so that the comparison takes the same
// time whatever the length of what was posted.
func (u *UI) tokenMatches(tok string) bool {
	want := u.opts.Token()
	if want == "" {
		return false
	}
	got, wantSum := sha256.Sum256([]byte(tok)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(got[:], wantSum[:]) == 1
}

// crossOrigin refuses a form posted from another site's page (the
// browser's Sec-Fetch-Site, else its Origin against the Host); a client
// that sends neither is no browser, and cannot be made to post by one.
var crossOrigin = http.NewCrossOriginProtection()

type loginPage struct {
	Title, Problem string
}

func (u *UI) loginForm(w http.ResponseWriter, r *http.Request) {
	u.render(w, http.StatusOK, "login", loginPage{Title: "Log in"})
}

func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	if err := crossOrigin.Check(r); err != nil {
		u.opts.Logger.Warn("webui: cross-origin login refused", "remote", r.RemoteAddr, "origin", r.Header.Get("Origin"))
		u.problem(w, http.StatusForbidden, "A login is posted from this page only.")
		return
	}
	src := sourceOf(r)
	if wait := u.throttle.wait(src); wait > 0 {
		// Refused before the token is looked at: a guesser learns
		// nothing from the attempts it makes while throttled.
		closeAfter(w)
		w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		u.render(w, http.StatusTooManyRequests, "login", loginPage{Title: "Log in",
			Problem: "Too many wrong tokens from your address: try again in " + wait.Round(time.Second).String() + "."})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if !u.tokenMatches(strings.TrimSpace(r.PostFormValue("token"))) {
		u.throttle.miss(src, r.RemoteAddr)
		closeAfter(w)
		u.render(w, http.StatusUnauthorized, "login", loginPage{Title: "Log in", Problem: "Wrong token."})
		return
	}
	exp := u.opts.Now().Add(u.opts.SessionTTL)
	v := u.sessions.issue(exp)
	if v == "" { // the token went between the check and now
		closeAfter(w)
		u.render(w, http.StatusUnauthorized, "login", loginPage{Title: "Log in", Problem: "Wrong token."})
		return
	}
	u.setCookie(w, r, v, int(u.opts.SessionTTL/time.Second))
	u.opts.Logger.Info("webui: login", "remote", r.RemoteAddr, "expires", exp.UTC())
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

// closeAfter ends the connection after this answer: a guesser opens a
// new one (and a new TLS handshake) for each try.
func closeAfter(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
}

// logout ends the session on this replica (its id is revoked until it
// would have expired) and deletes the cookie.
func (u *UI) logout(w http.ResponseWriter, r *http.Request) {
	if err := crossOrigin.Check(r); err != nil {
		u.problem(w, http.StatusForbidden, "A logout is posted from this page only.")
		return
	}
	if c, err := r.Cookie(cookieName); err == nil {
		if id, exp, ok := u.sessions.check(c.Value); ok {
			u.sessions.revoke(id, exp)
			u.opts.Logger.Info("webui: logout", "remote", r.RemoteAddr)
		}
	}
	u.setCookie(w, r, "", -1)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// setCookie sets the session cookie (maxAge < 0 deletes it).
func (u *UI) setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: value, Path: Prefix, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
}
