package webui

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// A browser navigating cannot send the admin API's bearer header, so the
// login form takes the admin token once and answers with a session
// cookie: "v1.<expiry in Unix seconds>.<HMAC-SHA256 of the two>", keyed
// with a key derived from the token. Nothing is kept on the server: a
// session is valid on every replica that has the same token, until it
// expires, and a rotated token ends every session at once. The cookie is
// HttpOnly (no script reads it), SameSite=Strict (no other site's page
// sends it), Secure over TLS, and scoped to /ui/: the admin API itself
// still takes only the bearer header.

const (
	cookieName     = "vminit_ui_session"
	sessionVersion = "v1"
	// maxLoginBody bounds the login form's body: one token.
	maxLoginBody = 4 << 10
)

// sessionKey derives the sessions' key from the admin token; nil for no
// token (no session is ever valid).
func sessionKey(token string) []byte {
	if token == "" {
		return nil
	}
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("vminit webui session key"))
	return m.Sum(nil)
}

// session returns a session value that expires at exp.
func (u *UI) session(exp time.Time) string {
	payload := sessionVersion + "." + strconv.FormatInt(exp.Unix(), 10)
	return payload + "." + base64.RawURLEncoding.EncodeToString(u.mac(payload))
}

func (u *UI) mac(payload string) []byte {
	m := hmac.New(sha256.New, u.key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// validSession reports whether v is a session this UI signed that has not
// expired.
func (u *UI) validSession(v string) bool {
	if u.key == nil {
		return false
	}
	i := strings.LastIndexByte(v, '.')
	if i < 0 {
		return false
	}
	payload, sig := v[:i], v[i+1:]
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, u.mac(payload)) {
		return false
	}
	ver, exp, _ := strings.Cut(payload, ".")
	unix, err := strconv.ParseInt(exp, 10, 64)
	return err == nil && ver == sessionVersion && u.opts.Now().Before(time.Unix(unix, 0))
}

// authorized: the bearer header (as the admin API takes it) or a valid
// session cookie.
func (u *UI) authorized(r *http.Request) bool {
	if u.opts.Bearer != nil && u.opts.Bearer(r) {
		return true
	}
	c, err := r.Cookie(cookieName)
	return err == nil && u.validSession(c.Value)
}

// tokenMatches compares hashes, so that the comparison takes the same
// time whatever the length of what was posted.
func (u *UI) tokenMatches(tok string) bool {
	if u.opts.Token == "" {
		return false
	}
	got, want := sha256.Sum256([]byte(tok)), sha256.Sum256([]byte(u.opts.Token))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
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
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if !u.tokenMatches(strings.TrimSpace(r.PostFormValue("token"))) {
		u.opts.Logger.Warn("webui: login refused: wrong token", "remote", r.RemoteAddr)
		u.render(w, http.StatusUnauthorized, "login", loginPage{Title: "Log in", Problem: "Wrong token."})
		return
	}
	exp := u.opts.Now().Add(u.opts.SessionTTL)
	u.setCookie(w, r, u.session(exp), int(u.opts.SessionTTL/time.Second))
	u.opts.Logger.Info("webui: login", "remote", r.RemoteAddr, "expires", exp.UTC())
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

func (u *UI) logout(w http.ResponseWriter, r *http.Request) {
	if err := crossOrigin.Check(r); err != nil {
		u.problem(w, http.StatusForbidden, "A logout is posted from this page only.")
		return
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
