package webui

import (
	"context"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/vminit/vminit/mdserver/firstboot"
)

// Source is what the pages show: the fleet's first boots, one
// instance's, and when they change. *mdserver.Handler is one.
type Source interface {
	Fleet(firstboot.Filter) firstboot.Summary
	Boot(name string) (firstboot.Status, bool)
	Boots() *firstboot.Tracker
}

// Options configure the UI.
type Options struct {
	// Token returns the admin token in force, asked at each login and
	// session check (the admin API re-reads its token file): the login
	// form takes it, and the session cookies are signed with a key
	// derived from it, so a new token ends every session at once. Nil or
	// "": nobody can log in.
	Token func() string
	// Bearer reports whether a request carries the admin API's bearer
	// token (the admin handler's own check); nil: the header is not
	// accepted.
	Bearer func(*http.Request) bool
	// SessionTTL is how long a login lasts; default 12 hours.
	SessionTTL time.Duration
	// PageSize bounds the rows of one page of the fleet; default 1,000.
	PageSize int
	// Refresh is how often a live page is re-rendered with no change
	// (elapsed times move on, a silent boot becomes stalled); default 15 s.
	Refresh time.Duration
	// MaxStreams bounds the live pages followed at once; default 64.
	MaxStreams int
	// Instance returns what an instance's page shows of its record
	// beside its boot (addresses, host name); nil: the page shows its
	// boot only.
	Instance func(name string) (Facts, bool)
	// Served returns what an instance's guest is served through a
	// dialect, one of Dialects (the first the default), for the page
	// /ui/instances/{name}/served the instance page links to; nil: no
	// such page.
	Served   func(ctx context.Context, name, dialect string) (Served, error)
	Dialects []string
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger receives a line per login and logout, and of wrong tokens a
	// source's first, its throttling and a count (throttle.go); default
	// slog.Default().
	Logger *slog.Logger
}

// Prefix is the path the UI is served under.
const Prefix = "/ui/"

// Owns reports whether the UI serves path (the admin handler hands such
// requests to it, unauthenticated: the UI has its own login).
func Owns(path string) bool { return path == "/ui" || strings.HasPrefix(path, Prefix) }

//go:embed templates/*.tmpl
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// UI is the web page's handler.
type UI struct {
	src      Source
	opts     Options
	sessions *sessions
	throttle *loginThrottle
	pages    *template.Template
	mux      *http.ServeMux
	streams  chan struct{} // a slot per live page followed
}

// New returns the UI over src.
func New(src Source, opts Options) *UI {
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 1000
	}
	if opts.Refresh <= 0 {
		opts.Refresh = 15 * time.Second
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = 64
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Token == nil {
		opts.Token = func() string { return "" }
	}
	u := &UI{src: src, opts: opts, streams: make(chan struct{}, opts.MaxStreams),
		sessions: &sessions{token: opts.Token, now: opts.Now},
		throttle: newLoginThrottle(opts.Now, opts.Logger)}
	u.pages = template.Must(template.New("").ParseFS(templateFS, "templates/*.tmpl"))
	static, _ := fs.Sub(staticFS, "static")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui/{$}", u.fleet)
	mux.HandleFunc("GET /ui/instances/{name}", u.instance)
	mux.HandleFunc("GET /ui/instances/{name}/served", u.served)
	mux.HandleFunc("GET /ui/stream", u.stream)
	mux.HandleFunc("GET /ui/login", u.loginForm)
	mux.HandleFunc("POST /ui/login", u.login)
	mux.HandleFunc("POST /ui/logout", u.logout)
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		u.problem(w, http.StatusNotFound, "No such page: "+r.Method+" "+r.URL.Path)
	})
	u.mux = mux
	return u
}

// securityHeaders: nothing but the UI's own script and style runs or
// loads (a message carrying markup is text, and would stay inert even if
// it were not), the page is never framed, and a form posts only here.
// Referrer-Policy same-origin keeps the Origin header on the login's
// POST (no-referrer would make it "null").
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
	"X-Frame-Options":        "DENY",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "same-origin",
	"Cache-Control":          "no-store",
}

// ServeHTTP serves the pages: the login form and the static files to
// anyone, the rest to a request with a session or the bearer token.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for k, v := range securityHeaders {
		w.Header().Set(k, v)
	}
	switch {
	case r.URL.Path == "/ui":
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return
	case r.URL.Path == "/ui/login" || strings.HasPrefix(r.URL.Path, "/ui/static/"):
	case !u.authorized(r):
		// As the admin API does: the connection closed, and a body
		// announced but never sent not waited for (net/http would read
		// up to 256 KiB of it after the handler).
		w.Header().Set("Connection", "close")
		defer http.NewResponseController(w).SetReadDeadline(time.Now())
		if r.Method == http.MethodGet && r.URL.Path != "/ui/stream" {
			http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
			return
		}
		u.problem(w, http.StatusUnauthorized, "Log in first.")
		return
	}
	u.mux.ServeHTTP(w, r)
}

// problem answers an error page.
func (u *UI) problem(w http.ResponseWriter, status int, msg string) {
	u.render(w, status, "problem", struct{ Title, Message string }{http.StatusText(status), msg})
}

// render executes a page into a buffer first, so that a template error
// is a 500 and never half a page.
func (u *UI) render(w http.ResponseWriter, status int, name string, data any) {
	var b strings.Builder
	if err := u.pages.ExecuteTemplate(&b, name, data); err != nil {
		u.opts.Logger.Error("webui: rendering", "page", name, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write([]byte(b.String()))
}
