package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vminit/vminit/delivery"
	"github.com/vminit/vminit/internal/lib/httppath"
	"github.com/vminit/vminit/internal/lib/httpserver"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/admin/webui"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// Options configure the admin API.
type Options struct {
	// Token is the bearer token every request must carry
	// (Authorization: Bearer <token>). An empty token refuses every
	// request: the admin API is never open.
	Token string
	// TokenFunc, if set, returns the token in force instead of Token,
	// asked at each request: WatchToken's re-reads the token file, so
	// that a rotated token is taken (and every web session of the old
	// one ended) without a restart.
	TokenFunc func() string
	// MaxBodyBytes bounds a PUT body; default 1 MiB, at most
	// spec.MaxSpecSize.
	MaxBodyBytes int64
	// Logger receives one line per change (put, delete); default
	// slog.Default().
	Logger *slog.Logger
	// Metadata is the guest handler serving the same store; the ec2 and
	// openstack previews ask it what the instance would be served, so they
	// show that handler's settings (its Ignition variant), and the first
	// boots are those its guests reported. Nil: a handler with the default
	// settings is made, which serves no guest: every first boot reads
	// pending unless Local.FollowBoots fills them from a shared store.
	Metadata *mdserver.Handler
	// MaxWatchers bounds the watch streams of GET /v1/boots?watch=true
	// open at once (more are refused with 503); default
	// DefaultMaxWatchers.
	MaxWatchers int
}

// PreviewDialects are the dialects the preview endpoint renders: NoCloud
// (the default), the config drive, Ignition, then every other dialect
// the metadata handler can crawl (mdserver.Dialects), in its order.
var PreviewDialects = previewDialects()

// previewConfigDrive is the preview of the config drive vminit builds: not
// a dialect of the server, but what the guest would get from a drive.
const previewConfigDrive = string(seed.ConfigDrive)

func previewDialects() []string {
	names := []string{mdserver.DialectNoCloud, previewConfigDrive, mdserver.DialectIgnition}
	for _, d := range mdserver.Dialects() {
		if d.Crawl && !slices.Contains(names, d.Name) {
			names = append(names, d.Name)
		}
	}
	return names
}

// NewHandler returns the admin API over store:
//
//	GET    /v1/instances                   names, addresses, revisions
//	GET    /v1/instances/{name}            the stored spec (YAML, defaults filled in)
//	PUT    /v1/instances/{name}            store a spec document (YAML or JSON)
//	DELETE /v1/instances/{name}            remove an instance
//	GET    /v1/instances/{name}/preview?dialect=D[&variant=fcos|flatcar|rhcos] D: one of PreviewDialects
//	GET    /v1/instances/{name}/boot       its first boot (firstboot.Status)
//	GET    /v1/boots[?watch=true][&FILTER][&limit=N&continue=T] the fleet's first boots, paged (firstboot.Summary; boots.go)
//	GET    /ui/…                           the first-boot web page (package webui), for a browser
//
// A preview is what the instance's guest would get, from Options.Metadata:
// nocloud, the NoCloud-net files (named as in a seed); configdrive, the
// config drive vminit builds (for an Ignition instance, one carrying its
// Ignition config); ignition, the Ignition config for the variant asked
// for (by default the spec's spec.ignition.variant); any other dialect
// (ec2, openstack), every path the guest would fetch, crawled as its agent
// does (Handler.Crawl).
//
// Every request needs the bearer token; errors are JSON ErrorBody. The
// web page under /ui/ takes the token too, or the session cookie its
// login form sets (on /ui/ only).
func NewHandler(store registry.Store, opts Options) http.Handler {
	ops := NewLocal(store, opts)
	a := &admin{ops: ops, opts: ops.opts, token: opts.TokenFunc}
	if a.token == nil {
		a.token = func() string { return opts.Token }
	}
	ui := webui.New(ops.opts.Metadata, webui.Options{Token: a.token, Bearer: a.authorized, Logger: ops.opts.Logger,
		Instance: ops.facts, Served: ops.served, Dialects: PreviewDialects})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/instances", a.list)
	mux.HandleFunc("GET /v1/instances/{name}", a.get)
	mux.HandleFunc("PUT /v1/instances/{name}", a.put)
	mux.HandleFunc("DELETE /v1/instances/{name}", a.delete)
	mux.HandleFunc("GET /v1/instances/{name}/preview", a.preview)
	mux.HandleFunc("GET /v1/instances/{name}/boot", a.boot)
	mux.HandleFunc("GET /v1/boots", a.boots)
	a.watchers = make(chan struct{}, a.opts.MaxWatchers)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if webui.Owns(r.URL.Path) { // its login is open; the rest takes the token or a session
			ui.ServeHTTP(w, r)
			return
		}
		if !a.authorized(r) {
			// Refused before a byte of the body is read, and the
			// connection closed: net/http would otherwise wait for an
			// announced body that never comes.
			w.Header().Set("WWW-Authenticate", `Bearer realm="vminit-admin"`)
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
			// net/http reads what is left of a body (up to 256 KiB) after
			// the handler, even on a connection it closes: end the read now.
			http.NewResponseController(w).SetReadDeadline(time.Now())
			return
		}
		// ServeMux answers an unclean path with an HTML redirect and a
		// method it does not route with a plain-text 405; every error here
		// is JSON.
		if !httppath.IsCanonical(r.URL.Path) {
			writeError(w, http.StatusBadRequest, "path %q is not in canonical form (no //, . or .. elements)", r.URL.Path)
			return
		}
		if _, pattern := mux.Handler(r); (pattern == "" || pattern == "/") && routed(mux, r) {
			writeError(w, http.StatusMethodNotAllowed, "method %s not allowed on %s", r.Method, r.URL.Path)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// routed reports whether mux routes r's path for another method.
func routed(mux *http.ServeMux, r *http.Request) bool {
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		r2 := *r
		r2.Method = m
		if _, pattern := mux.Handler(&r2); pattern != "" && pattern != "/" {
			return true
		}
	}
	return false
}

// NewServer returns the http.Server for the admin handler, with the
// timeouts an API reachable by more than its operators needs: headers in
// 5 s, a whole request (a spec of up to MaxBodyBytes) in 30 s, an idle
// connection kept 60 s. Serve it on a listener of its own, apart from the
// guests' (the guests' connection limits do not take its descriptors).
func NewServer(h http.Handler) *http.Server {
	return httpserver.New(h, 30*time.Second, 60*time.Second)
}

type admin struct {
	ops      *Local
	opts     Options
	token    func() string // the token in force
	watchers chan struct{} // a slot per watch stream open
}

func (a *admin) authorized(r *http.Request) bool {
	want := a.token()
	if want == "" {
		return false
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	// Comparing hashes keeps the comparison constant-time in the length
	// of the token too.
	h, wantSum := sha256.Sum256([]byte(strings.TrimSpace(tok))), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(h[:], wantSum[:]) == 1
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, ErrorBody{Errors: []*spec.FieldError{{Message: fmt.Sprintf(format, args...)}}})
}

// writeErr answers an operation's error with its status: 422 and every
// field error for an invalid document, the refusal's own status, 409 for
// a conflict, 503 for a store that cannot be reached.
func writeErr(w http.ResponseWriter, err error) {
	var ref *refusal
	switch es := spec.AsErrors(err); {
	case es != nil:
		for _, e := range es {
			e.File = ""
		}
		writeJSON(w, http.StatusUnprocessableEntity, ErrorBody{Errors: es})
	case errors.As(err, &ref):
		writeError(w, ref.status, "%s", ref.msg)
	case errors.Is(err, registry.ErrAddressConflict), errors.Is(err, registry.ErrConflict):
		writeError(w, http.StatusConflict, "%v", err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, registry.ErrUnavailable):
		writeError(w, http.StatusServiceUnavailable, "%v", err)
	default:
		writeError(w, http.StatusInternalServerError, "%v", err)
	}
}

func (a *admin) list(w http.ResponseWriter, r *http.Request) {
	list, _ := a.ops.List(r.Context())
	writeJSON(w, http.StatusOK, InstanceList{Instances: list})
}

func (a *admin) get(w http.ResponseWriter, r *http.Request) {
	rec, data, err := a.ops.get(r.PathValue("name"))
	if err != nil {
		writeErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("ETag", `"`+rec.Revision+`"`)
	w.Write(data)
}

func (a *admin) put(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "the document is larger than %d bytes", mbe.Limit)
			return
		}
		writeError(w, http.StatusBadRequest, "reading the body: %v", err)
		return
	}
	s, err := a.ops.Put(r.Context(), r.PathValue("name"), body)
	if err != nil {
		writeErr(w, err)
		return
	}
	a.opts.Logger.Info("admin: instance stored", "instance", s.Name, "revision", s.Revision, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, s)
}

func (a *admin) delete(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := a.ops.Delete(r.Context(), name); err != nil {
		writeErr(w, err)
		return
	}
	a.opts.Logger.Info("admin: instance deleted", "instance", name, "remote", r.RemoteAddr)
	w.WriteHeader(http.StatusNoContent)
}

func (a *admin) preview(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, err := a.ops.preview(r.Context(), r.PathValue("name"), q.Get("dialect"), q.Get("variant"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func previewFile(path string, data []byte) PreviewFile {
	if utf8.Valid(data) {
		return PreviewFile{Path: path, Content: string(data)}
	}
	return PreviewFile{Path: path, ContentBase64: base64.StdEncoding.EncodeToString(data)}
}

// configDrive is the config drive of rec: the cloud-init seed, or for an
// Ignition instance its config as md serves it, on a config drive.
func configDrive(ctx context.Context, md *mdserver.Handler, rec *registry.Record) (*seed.Seed, error) {
	if rec.Instance().Spec.Agent != spec.AgentIgnition {
		return seed.Build(rec.Instance(), seed.ConfigDrive, seed.Options{})
	}
	files, err := md.Crawl(ctx, rec, mdserver.DialectIgnition)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.New("the metadata handler serves no Ignition config")
	}
	return delivery.Seed(files[0].Data, rec.Instance(), seed.ConfigDrive)
}
