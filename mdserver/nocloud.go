package mdserver

import (
	"net/http"

	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/seed"
)

// The NoCloud-net dialect: the files of a NoCloud seed (seed.Metadata)
// over HTTP, for cloud-init's NoCloud datasource given a seed URL.
//
//	GET  /nocloud/meta-data, user-data, vendor-data, network-config

func (h *Handler) nocloudRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /nocloud/{file}", h.nocloud)
}

// NoCloud-net files under /nocloud/. Point cloud-init at them with
// ds=nocloud-net;s=http://HOST:PORT/nocloud/ (the trailing slash is
// required: cloud-init 22.4 appends the file names to the URL as is).
func (h *Handler) nocloud(w http.ResponseWriter, r *http.Request) {
	rec := recordOf(w)
	file := r.PathValue("file")
	switch file {
	case "user-data":
		b, ctype, err := h.userData(r, rec, "")
		if h.failed(w, rec, err) {
			return
		}
		serveBytes(w, ctype, b)
	case "meta-data", "vendor-data", "network-config":
		files, err := h.nocloudFiles(rec)
		if h.failed(w, rec, err) {
			return
		}
		b, ok := files[file]
		if !ok && file == "network-config" {
			emptyStatus(w, http.StatusNotFound)
			return
		}
		// vendor-data is 200 even when empty: cloud-init 22.4 retries
		// failed seed files.
		serveBytes(w, textPlain, b)
	default:
		emptyStatus(w, http.StatusNotFound)
	}
}

// nocloudFiles renders (once) the record's NoCloud meta-data, vendor-data
// and network-config (version 2).
func (h *Handler) nocloudFiles(rec *registry.Record) (map[string][]byte, error) {
	e := h.entry(rec)
	return h.metadataFiles(rec, e, &e.nocloud, seed.NoCloud, "")
}
