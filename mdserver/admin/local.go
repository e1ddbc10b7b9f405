package admin

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/admin/webui"
	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// API is what the admin API does: Client does it over HTTP to a running
// server, Local in process on a store its caller holds. `vminit
// instances` works through it against either.
type API interface {
	List(ctx context.Context) ([]InstanceSummary, error)
	Get(ctx context.Context, name string) ([]byte, error)
	Put(ctx context.Context, name string, doc []byte) (*InstanceSummary, error)
	Delete(ctx context.Context, name string) error
	Preview(ctx context.Context, name, dialect string) (*Preview, error)
	// Boot, Boots and WatchBoots read the first boots (boots.go).
	Boot(ctx context.Context, name string) (*firstboot.Status, error)
	Boots(ctx context.Context, f firstboot.Filter) (*firstboot.Summary, error)
	WatchBoots(ctx context.Context, f firstboot.Filter, fn func(firstboot.Summary) error) error
}

var (
	_ API = (*Client)(nil)
	_ API = (*Local)(nil)
)

// Local is the admin API's operations on a store, in process: NewHandler
// answers every request with them, and a caller holding the store itself
// (`vminit instances --kubeconfig`, on a cluster's kubestore) calls them
// directly, with the same checks and the same answers. An invalid
// document is refused with spec.Errors; other refusals carry the status
// the handler answers them with, and an unknown instance wraps
// registry.ErrNotFound.
type Local struct {
	store registry.Store
	opts  Options
}

// NewLocal returns the operations on store; opts as for NewHandler
// (Token is not used).
func NewLocal(store registry.Store, opts Options) *Local {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 1 << 20
	}
	opts.MaxBodyBytes = min(opts.MaxBodyBytes, spec.MaxSpecSize)
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxWatchers <= 0 {
		opts.MaxWatchers = DefaultMaxWatchers
	}
	// A handler made here serves no guest: its first boots are all
	// pending, unless FollowBoots fills them from a shared store.
	if opts.Metadata == nil {
		opts.Metadata = mdserver.NewHandler(store, mdserver.Options{Logger: opts.Logger})
	}
	return &Local{store: store, opts: opts}
}

// refusal is a refusal other than an invalid document, with the HTTP
// status the handler answers it with.
type refusal struct {
	status int
	msg    string
	err    error // what it wraps, if anything
}

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return e.err }

func refuse(status int, format string, args ...any) error {
	return &refusal{status: status, msg: fmt.Sprintf(format, args...)}
}

func notFound(name string) error {
	return &refusal{status: http.StatusNotFound, msg: fmt.Sprintf("instance %q not found", name), err: registry.ErrNotFound}
}

// List returns every instance the store serves, by name.
func (l *Local) List(context.Context) ([]InstanceSummary, error) {
	snap := l.store.Snapshot()
	out := make([]InstanceSummary, 0, snap.Len())
	for _, n := range snap.Names() {
		rec, ok := snap.ByName(n)
		if !ok {
			continue // its deferred check failed (dirstore.Options.DeferChecks); the store takes it out
		}
		out = append(out, summary(rec, rec.UID))
	}
	return out, nil
}

// summary is rec's entry in a list (uid "" for a put's answer).
func summary(rec *registry.Record, uid string) InstanceSummary {
	s := InstanceSummary{Name: rec.Name, Addresses: make([]string, len(rec.Addresses)), Revision: rec.Revision, UID: uid}
	for i, ad := range rec.Addresses {
		s.Addresses[i] = ad.String()
	}
	return s
}

func (l *Local) lookup(name string) (*registry.Record, error) {
	rec, ok := l.store.Snapshot().ByName(name)
	if !ok {
		return nil, notFound(name)
	}
	return rec, nil
}

// Get returns an instance's stored spec as YAML, defaults filled in.
func (l *Local) Get(_ context.Context, name string) ([]byte, error) {
	_, data, err := l.get(name)
	return data, err
}

func (l *Local) get(name string) (*registry.Record, []byte, error) {
	rec, err := l.lookup(name)
	if err != nil {
		return nil, nil, err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(rec.Instance()); err != nil {
		return nil, nil, refuse(http.StatusInternalServerError, "encoding %s: %v", rec.Name, err)
	}
	enc.Close()
	return rec, buf.Bytes(), nil
}

// Put stores a spec document under name, which must be its
// metadata.name.
func (l *Local) Put(ctx context.Context, name string, doc []byte) (*InstanceSummary, error) {
	if int64(len(doc)) > l.opts.MaxBodyBytes {
		return nil, refuse(http.StatusRequestEntityTooLarge, "the document is larger than %d bytes", l.opts.MaxBodyBytes)
	}
	// Validate here first so that a name mismatch is reported together
	// with every other problem, and the store is not touched.
	rec, err := registry.DecodeDocument(doc, "")
	if err != nil {
		return nil, err
	}
	if rec.Name != name {
		return nil, spec.Errors{{Field: "metadata.name", Message: fmt.Sprintf("is %q but the URL names %q", rec.Name, name)}}
	}
	if rec, err = l.store.Put(ctx, doc); err != nil {
		return nil, err
	}
	s := summary(rec, "")
	return &s, nil
}

// Delete removes an instance.
func (l *Local) Delete(ctx context.Context, name string) error {
	err := l.store.Delete(ctx, name)
	if errors.Is(err, registry.ErrNotFound) {
		return notFound(name)
	}
	return err
}

// Preview returns what the instance's guest would get in a dialect (one
// of PreviewDialects).
func (l *Local) Preview(ctx context.Context, name, dialect string) (*Preview, error) {
	return l.preview(ctx, name, dialect, "")
}

// preview is Preview, with the Ignition variant for the ignition dialect
// ("": the spec's).
func (l *Local) preview(ctx context.Context, name, dialect, variant string) (*Preview, error) {
	rec, err := l.lookup(name)
	if err != nil {
		return nil, err
	}
	if dialect == "" {
		dialect = PreviewDialects[0]
	}
	p := &Preview{Name: rec.Name, Dialect: dialect, Revision: rec.Revision, Files: []PreviewFile{}}
	if err := l.previewFiles(ctx, p, rec, variant); err != nil {
		return nil, err
	}
	if served := dialect; dialect != previewConfigDrive && !rec.Instance().Spec.MetadataServer.ServesDialect(served) {
		p.Warnings = append(p.Warnings, fmt.Sprintf("the metadata server does not serve this instance through the %s dialect (spec.metadataServer.dialects, or imdsv2: required): its guest gets 403 there", dialect))
	}
	return p, nil
}

// facts is what the web page's instance page shows of a record beside
// its boot.
func (l *Local) facts(name string) (webui.Facts, bool) {
	rec, err := l.lookup(name)
	if err != nil {
		return webui.Facts{}, false
	}
	s := &rec.Instance().Spec
	f := webui.Facts{Hostname: s.Hostname, FQDN: s.FQDN}
	for _, a := range rec.Addresses {
		f.Addresses = append(f.Addresses, a.String())
	}
	return f, true
}

// served is the preview as the web page shows it (its own page, behind
// its session: a browser cannot send the API's bearer token).
func (l *Local) served(ctx context.Context, name, dialect string) (webui.Served, error) {
	p, err := l.preview(ctx, name, dialect, "")
	if err != nil {
		return webui.Served{}, err
	}
	s := webui.Served{Warnings: p.Warnings}
	for _, f := range p.Files {
		sf := webui.ServedFile{Path: f.Path, Content: f.Content, Size: len(f.Content)}
		if f.ContentBase64 != "" {
			b, _ := base64.StdEncoding.DecodeString(f.ContentBase64)
			sf.Binary, sf.Size = true, len(b)
		}
		s.Files = append(s.Files, sf)
	}
	return s, nil
}

// previewFiles fills p's files and warnings for p.Dialect.
func (l *Local) previewFiles(ctx context.Context, p *Preview, rec *registry.Record, variant string) error {
	md := l.opts.Metadata
	switch p.Dialect {
	case mdserver.DialectNoCloud:
		// What the server serves as NoCloud-net (for an Ignition instance
		// its user-data is the Ignition config), named as in a seed.
		files, err := md.Crawl(ctx, rec, mdserver.DialectNoCloud)
		if spec.AsErrors(err) != nil {
			return err
		} else if err != nil {
			p.Warnings = append(p.Warnings, err.Error())
		}
		slices.SortFunc(files, func(x, y seed.File) int { return strings.Compare(x.Path, y.Path) })
		for _, f := range files {
			p.Files = append(p.Files, previewFile(strings.TrimPrefix(f.Path, "/nocloud/"), f.Data))
		}
	case previewConfigDrive:
		// The config drive vminit builds for the instance: cloud-init's,
		// or one carrying its Ignition config as the server renders it.
		s, err := configDrive(ctx, md, rec)
		if err != nil {
			return err
		}
		for _, f := range s.Files {
			p.Files = append(p.Files, previewFile(f.Path, f.Data))
		}
	case mdserver.DialectIgnition:
		res, err := ignition.Render(rec.Instance(), ignition.Options{Variant: ignition.Variant(variant), AllowPartial: true, ReportTo: md.ReportPreviewBase()})
		if errors.Is(err, ignition.ErrUnknownVariant) {
			return refuse(http.StatusBadRequest, "variant: %v", err)
		}
		if err != nil {
			return err
		}
		p.Files = append(p.Files, previewFile("config.ign", res.Config))
		p.Warnings = res.Warnings
	default:
		if !slices.Contains(PreviewDialects, p.Dialect) {
			return refuse(http.StatusBadRequest, "dialect %q: want one of %s", p.Dialect, strings.Join(PreviewDialects, ", "))
		}
		files, err := md.Crawl(ctx, rec, p.Dialect)
		if err != nil {
			p.Warnings = append(p.Warnings, err.Error())
		}
		for _, f := range files {
			p.Files = append(p.Files, previewFile(f.Path, f.Data))
		}
	}
	return nil
}
