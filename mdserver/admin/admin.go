package admin

import (
	"bytes"
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

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/delivery"
	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/internal/lib/httppath"
	"github.com/vminit/vminit/internal/lib/httpserver"
	"github.com/vminit/vminit/mdserver"
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
	// MaxBodyBytes bounds a PUT body; default 1 MiB, at most
	// spec.MaxSpecSize.
	MaxBodyBytes int64
	// Logger receives one line per change (put, delete); default
	// slog.Default().
	Logger *slog.Logger
	// Metadata is the guest handler serving the same store; the ec2 and
	// openstack previews ask it what the instance would be served, so they
	// show that handler's settings (its Ignition variant). Nil: a handler
	// with the default settings is made for the previews.
	Metadata *mdserver.Handler
}

// PreviewDialects are the dialects the preview endpoint renders.
var PreviewDialects = []string{"nocloud", "configdrive", "ignition", mdserver.DialectEC2, mdserver.DialectOpenStack}

// NewHandler returns the admin API over store:
//
//	GET    /v1/instances                   names, addresses, revisions
//	GET    /v1/instances/{name}            the stored spec (YAML, defaults filled in)
//	PUT    /v1/instances/{name}            store a spec document (YAML or JSON)
//	DELETE /v1/instances/{name}            remove an instance
//	GET    /v1/instances/{name}/preview?dialect=nocloud|configdrive|ignition|ec2|openstack[&variant=fcos|flatcar|rhcos]
//
// A preview is what the instance's guest would get, from Options.Metadata:
// nocloud, the NoCloud-net files (named as in a seed); ec2 and openstack,
// every path the guest would fetch, crawled as cloud-init does;
// configdrive, the config drive vminit builds (for an Ignition instance,
// one carrying its Ignition config); ignition, the Ignition config for
// the variant asked for (by default the spec's spec.ignition.variant).
//
// Every request needs the bearer token; errors are JSON ErrorBody.
func NewHandler(store registry.Store, opts Options) http.Handler {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 1 << 20
	}
	opts.MaxBodyBytes = min(opts.MaxBodyBytes, spec.MaxSpecSize)
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Metadata == nil {
		opts.Metadata = mdserver.NewHandler(store, mdserver.Options{Logger: opts.Logger})
	}
	a := &admin{store: store, opts: opts, tokenHash: sha256.Sum256([]byte(opts.Token))}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/instances", a.list)
	mux.HandleFunc("GET /v1/instances/{name}", a.get)
	mux.HandleFunc("PUT /v1/instances/{name}", a.put)
	mux.HandleFunc("DELETE /v1/instances/{name}", a.delete)
	mux.HandleFunc("GET /v1/instances/{name}/preview", a.preview)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
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
	store     registry.Store
	opts      Options
	tokenHash [32]byte
}

func (a *admin) authorized(r *http.Request) bool {
	if a.opts.Token == "" {
		return false
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	// Comparing hashes keeps the comparison constant-time in the length
	// of the token too.
	h := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(h[:], a.tokenHash[:]) == 1
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

func (a *admin) list(w http.ResponseWriter, r *http.Request) {
	snap := a.store.Snapshot()
	out := InstanceList{Instances: make([]InstanceSummary, 0, snap.Len())}
	for _, n := range snap.Names() {
		rec, ok := snap.ByName(n)
		if !ok {
			continue // its deferred check failed (dirstore.Options.DeferChecks); the store takes it out
		}
		s := InstanceSummary{Name: n, Addresses: make([]string, len(rec.Addresses)), Revision: rec.Revision, UID: rec.UID}
		for i, ad := range rec.Addresses {
			s.Addresses[i] = ad.String()
		}
		out.Instances = append(out.Instances, s)
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *admin) lookup(w http.ResponseWriter, r *http.Request) (*registry.Record, bool) {
	name := r.PathValue("name")
	rec, ok := a.store.Snapshot().ByName(name)
	if !ok {
		writeError(w, http.StatusNotFound, "instance %q not found", name)
	}
	return rec, ok
}

func (a *admin) get(w http.ResponseWriter, r *http.Request) {
	rec, ok := a.lookup(w, r)
	if !ok {
		return
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(rec.Instance); err != nil {
		writeError(w, http.StatusInternalServerError, "encoding %s: %v", rec.Name, err)
		return
	}
	enc.Close()
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("ETag", `"`+rec.Revision+`"`)
	w.Write(buf.Bytes())
}

func (a *admin) put(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
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
	// Validate here first so that a name mismatch is reported together
	// with every other problem, and the store is not touched.
	rec, err := registry.DecodeDocument(body, "")
	if err != nil {
		a.putError(w, err)
		return
	}
	if rec.Name != name {
		writeJSON(w, http.StatusUnprocessableEntity, ErrorBody{Errors: []*spec.FieldError{{Field: "metadata.name",
			Message: fmt.Sprintf("is %q but the URL names %q", rec.Name, name)}}})
		return
	}
	rec, err = a.store.Put(r.Context(), body)
	if err != nil {
		a.putError(w, err)
		return
	}
	a.opts.Logger.Info("admin: instance stored", "instance", rec.Name, "revision", rec.Revision, "remote", r.RemoteAddr)
	s := InstanceSummary{Name: rec.Name, Revision: rec.Revision, Addresses: []string{}}
	for _, ad := range rec.Addresses {
		s.Addresses = append(s.Addresses, ad.String())
	}
	writeJSON(w, http.StatusOK, s)
}

func (a *admin) putError(w http.ResponseWriter, err error) {
	switch es := spec.AsErrors(err); {
	case es != nil:
		for _, e := range es {
			e.File = ""
		}
		writeJSON(w, http.StatusUnprocessableEntity, ErrorBody{Errors: es})
	case errors.Is(err, registry.ErrAddressConflict), errors.Is(err, registry.ErrConflict):
		writeError(w, http.StatusConflict, "%v", err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, registry.ErrUnavailable):
		writeError(w, http.StatusServiceUnavailable, "%v", err)
	default:
		writeError(w, http.StatusInternalServerError, "%v", err)
	}
}

func (a *admin) delete(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := a.store.Delete(r.Context(), name)
	switch {
	case err == nil:
		a.opts.Logger.Info("admin: instance deleted", "instance", name, "remote", r.RemoteAddr)
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, registry.ErrNotFound):
		writeError(w, http.StatusNotFound, "instance %q not found", name)
	default:
		a.putError(w, err)
	}
}

func (a *admin) preview(w http.ResponseWriter, r *http.Request) {
	rec, ok := a.lookup(w, r)
	if !ok {
		return
	}
	dialect := r.URL.Query().Get("dialect")
	if dialect == "" {
		dialect = "nocloud"
	}
	p := Preview{Name: rec.Name, Dialect: dialect, Revision: rec.Revision, Files: []PreviewFile{}}
	md := a.opts.Metadata
	switch dialect {
	case "nocloud":
		// What the server serves as NoCloud-net (for an Ignition instance
		// its user-data is the Ignition config), named as in a seed.
		files, err := md.Crawl(r.Context(), rec, mdserver.DialectNoCloud)
		if spec.AsErrors(err) != nil {
			a.putError(w, err)
			return
		} else if err != nil {
			p.Warnings = append(p.Warnings, err.Error())
		}
		slices.SortFunc(files, func(x, y seed.File) int { return strings.Compare(x.Path, y.Path) })
		for _, f := range files {
			p.Files = append(p.Files, previewFile(strings.TrimPrefix(f.Path, "/nocloud/"), f.Data))
		}
	case "configdrive":
		// The config drive vminit builds for the instance: cloud-init's,
		// or one carrying its Ignition config as the server renders it.
		s, err := configDrive(r.Context(), md, rec)
		if err != nil {
			a.putError(w, err)
			return
		}
		for _, f := range s.Files {
			p.Files = append(p.Files, previewFile(f.Path, f.Data))
		}
	case "ignition":
		res, err := ignition.Render(rec.Instance, ignition.Options{
			Variant: ignition.Variant(r.URL.Query().Get("variant")), AllowPartial: true})
		if errors.Is(err, ignition.ErrUnknownVariant) {
			writeError(w, http.StatusBadRequest, "variant: %v", err)
			return
		}
		if err != nil {
			a.putError(w, err)
			return
		}
		p.Files = append(p.Files, previewFile("config.ign", res.Config))
		p.Warnings = res.Warnings
	case mdserver.DialectEC2, mdserver.DialectOpenStack:
		files, err := a.opts.Metadata.Crawl(r.Context(), rec, dialect)
		if err != nil {
			p.Warnings = append(p.Warnings, err.Error())
		}
		for _, f := range files {
			p.Files = append(p.Files, previewFile(f.Path, f.Data))
		}
	default:
		writeError(w, http.StatusBadRequest, "dialect %q: want one of %s", dialect, strings.Join(PreviewDialects, ", "))
		return
	}
	if served := dialect; dialect != "configdrive" && !rec.Instance.Spec.MetadataServer.ServesDialect(served) {
		p.Warnings = append(p.Warnings, fmt.Sprintf("the metadata server does not serve this instance through the %s dialect (spec.metadataServer.dialects, or imdsv2: required): its guest gets 403 there", dialect))
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
	if rec.Instance.Spec.Agent != spec.AgentIgnition {
		return seed.Build(rec.Instance, seed.ConfigDrive, seed.Options{})
	}
	files, err := md.Crawl(ctx, rec, mdserver.DialectIgnition)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.New("the metadata handler serves no Ignition config")
	}
	return delivery.Seed(files[0].Data, rec.Instance, seed.ConfigDrive)
}
