package mdserver

import (
	"net/http"
	"strings"
	"sync"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

// A served guest reports its first boot to the server that served it: its
// cloud-init user data carries the reporting webhook and the final report
// unit (cloudinit.WithReport), its Ignition config the completion unit
// (ignition.Options.ReportTo), pointed at Options.ReportURL or else at the
// scheme and host the guest used for the request, as configURL is.
//
// The data with the report differs by that base URL, which a guest's Host
// header chooses, so it is cached by base URL: per record revision, a few
// base URLs each (maxReportBases; a guest uses one, and one that sends
// many Hosts only renders its own data again).

// PreviewHost is the host a preview (Crawl) shows the report going to
// when Options.ReportURL is unset: there is no guest whose Host to use.
// The .invalid domain says it is no real host.
const PreviewHost = "metadata-server.invalid"

// maxReportBases bounds the base URLs whose data a record revision keeps.
const maxReportBases = 4

// reportOptions returns Options.ReportURL in canonical form, and whether
// reports are off: a ReportURL ParseBaseURL refuses turns them off, with
// an error logged (vminit serve checks its flag before it gets here).
func reportOptions(opts Options) (string, bool) {
	if opts.NoBootReports || opts.ReportURL == "" {
		return opts.ReportURL, opts.NoBootReports
	}
	base, err := bootreport.ParseBaseURL(opts.ReportURL)
	if err != nil {
		opts.Logger.Error("first-boot reports off: Options.ReportURL", "url", opts.ReportURL, "error", err)
		return opts.ReportURL, true
	}
	return base, false
}

// requestBase is this server as the guest reached it: scheme and host.
func requestBase(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// reportBase is the base URL r's guest reports to, or "" for none: reports
// off, or a Host that is no URL host (a guest can send anything).
func (h *Handler) reportBase(r *http.Request) string {
	switch {
	case h.opts.NoBootReports:
		return ""
	case h.opts.ReportURL != "":
		return h.opts.ReportURL
	case strings.ContainsAny(r.Host, "/?#@\\") || r.Host == "":
		return ""
	}
	base, err := bootreport.ParseBaseURL(requestBase(r))
	if err != nil {
		return ""
	}
	return base
}

// ReportPreviewBase is the base URL previews show the report going to:
// Options.ReportURL, else http://PreviewHost; "" with reports off.
func (h *Handler) ReportPreviewBase() string {
	if h.opts.NoBootReports {
		return ""
	}
	if h.opts.ReportURL != "" {
		return h.opts.ReportURL
	}
	return "http://" + PreviewHost
}

// byBase is a record revision's data for each base URL, up to
// maxReportBases of them, rendered on first use (errors kept too, as a
// piece keeps them).
type byBase struct {
	mu sync.Mutex
	m  map[string]rendered
}

type rendered struct {
	data []byte
	err  error
}

func newByBase(*Handler, *registry.Record) (*byBase, error) {
	return &byBase{m: map[string]rendered{}}, nil
}

// get returns the data for base, rendering and keeping it on first use.
func (v *byBase) get(h *Handler, rec *registry.Record, base string, render func() ([]byte, error)) ([]byte, error) {
	v.mu.Lock()
	got, ok := v.m[base]
	v.mu.Unlock()
	if ok {
		return got.data, got.err
	}
	data, err := render()
	v.mu.Lock()
	defer v.mu.Unlock()
	if prev, ok := v.m[base]; ok {
		return prev.data, prev.err // rendered meanwhile by another request
	}
	if len(v.m) < maxReportBases {
		v.m[base] = rendered{data, err}
		h.account(h.entry(rec), int64(len(base)+len(data)))
	}
	return data, err
}

func byBaseSize(*byBase) int64 { return 0 } // accounted by get

// The data with the report, by base URL. The plain data they are made
// from is not kept beside them: with reports on, no guest gets it.
var (
	cloudUserDataReported = newPiece(newByBase, byBaseSize)
	ignitionReported      = newPiece(newByBase, byBaseSize)
)

// cloudInitUserData is the record's cloud-init user data as r's guest gets
// it: with the report to reportBase(r), if any.
func (h *Handler) cloudInitUserData(r *http.Request, rec *registry.Record) ([]byte, error) {
	base := h.reportBase(r)
	if base == "" || !spec.ReportsFirstBoot(rec.Agent()) {
		// An agent that cannot report (cloudbase-init): its user data is
		// served as rendered.
		return cloudUserData.get(h, rec)
	}
	v, _ := cloudUserDataReported.get(h, rec)
	return v.get(h, rec, base, func() ([]byte, error) {
		ud, err := renderCloudUserData(rec)
		if err != nil {
			return nil, err
		}
		return cloudinit.WithReport(ud, base)
	})
}

// ignitionConfigFor is the record's Ignition config as r's guest gets it:
// with the completion unit reporting to reportBase(r), if any.
func (h *Handler) ignitionConfigFor(r *http.Request, rec *registry.Record) ([]byte, error) {
	base := h.reportBase(r)
	if base == "" {
		return ignitionConfig.get(h, rec)
	}
	v, _ := ignitionReported.get(h, rec)
	return v.get(h, rec, base, func() ([]byte, error) { return h.renderIgnition(rec, base) })
}

// renderIgnition renders the record's Ignition config for the handler's
// variant, reporting to base unless it is empty.
func (h *Handler) renderIgnition(rec *registry.Record, base string) ([]byte, error) {
	res, err := ignition.Render(rec.Instance(), ignition.Options{Variant: h.opts.IgnitionVariant, AllowPartial: true, ReportTo: base})
	if err != nil {
		return nil, err
	}
	for _, w := range res.Warnings {
		h.log.Warn("ignition rendering", "instance", rec.Name, "warning", w)
	}
	return res.Config, nil
}
