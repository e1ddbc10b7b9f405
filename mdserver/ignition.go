package mdserver

import (
	"net/http"
	"strings"

	"github.com/vminit/vminit/delivery"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

// The Ignition dialect: an Ignition instance's config, and a pointer
// config to it for transports too small to carry the config itself.
//
//	GET  /ignition/config                        the instance's Ignition config
//	GET  /ignition/pointer[?transport=ec2|…]     a pointer config with sha512

// DialectIgnition is the Ignition dialect's name.
const DialectIgnition = spec.DialectIgnition

func init() {
	register(&dialect{
		name:  DialectIgnition,
		title: "Ignition",
		paths: []string{"/ignition/config, /ignition/pointer[?transport=ec2]"},
		owns:  func(path string) bool { return strings.HasPrefix(path, "/ignition/") },
		configure: func(h *Handler, mux *http.ServeMux) guard {
			mux.HandleFunc("GET /ignition/config", h.ignitionConfig)
			mux.HandleFunc("GET /ignition/pointer", h.ignitionPointer)
			return nil
		},
		crawl: func(c *crawler) { c.leaf("/ignition/config") },
	})
}

const ignitionType = "application/vnd.coreos.ignition+json"

// configURL is this server's /ignition/config as the guest reached it.
func configURL(r *http.Request) string { return requestBase(r) + "/ignition/config" }

func (h *Handler) ignitionConfig(w http.ResponseWriter, r *http.Request) {
	rec := recordOf(w)
	cfg, err := h.ignitionConfigFor(r, rec)
	if h.failed(w, rec, err) {
		return
	}
	serveBytes(w, ignitionType, cfg)
}

// ignitionPointer answers a pointer config: ignition.config.replace
// fetching /ignition/config from this server, verified by its sha512. With
// ?transport=NAME (a delivery.Transports name) the pointer is checked
// against that transport's budget (413 if even the pointer is too large).
func (h *Handler) ignitionPointer(w http.ResponseWriter, r *http.Request) {
	rec := recordOf(w)
	cfg, err := h.ignitionConfigFor(r, rec)
	if h.failed(w, rec, err) {
		return
	}
	ptr, err := delivery.Pointer(cfg, configURL(r), nil)
	if h.failed(w, rec, err) {
		return
	}
	if name := r.URL.Query().Get("transport"); name != "" {
		t, err := delivery.LookupTransport(name)
		if err != nil {
			emptyStatus(w, http.StatusBadRequest)
			return
		}
		if t.Size(ptr) > t.Limit {
			emptyStatus(w, http.StatusRequestEntityTooLarge)
			return
		}
	}
	serveBytes(w, ignitionType, ptr)
}

// ignitionConfig is the record's Ignition config, for the handler's
// variant, without the first-boot report (ignitionConfigFor adds it).
var ignitionConfig = newPiece(func(h *Handler, rec *registry.Record) ([]byte, error) {
	return h.renderIgnition(rec, "")
}, bytesLen)
