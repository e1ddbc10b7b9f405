package mdserver

import (
	"net/http"
	"strings"

	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// The NoCloud-net dialect: the files of a NoCloud seed (seed.Metadata)
// over HTTP, for cloud-init's NoCloud datasource given a seed URL.
//
//	GET  /nocloud/meta-data, user-data, vendor-data, network-config

// DialectNoCloud is the NoCloud-net dialect's name.
const DialectNoCloud = spec.DialectNoCloud

// nocloudSeedFiles are the files of a NoCloud seed the dialect serves.
var nocloudSeedFiles = []string{"meta-data", "user-data", "vendor-data", "network-config"}

func init() {
	register(&dialect{
		name:  DialectNoCloud,
		title: "NoCloud-net",
		paths: []string{"/nocloud/{" + strings.Join(nocloudSeedFiles, ",") + "}",
			"(kernel argument ds=nocloud-net;s=http://HOST:PORT/nocloud/)"},
		// cloud-init 22.4's ds-identify (dscheck_NoCloud) reads the
		// SMBIOS serial like the kernel command line; the URL needs its
		// trailing slash.
		readers: []DialectReader{{Agent: spec.AgentCloudInit, SMBIOS: func(host, _ string) string {
			return "type=1,serial=ds=nocloud-net;s=http://" + host + "/nocloud/"
		}}},
		owns: func(path string) bool { return strings.HasPrefix(path, "/nocloud/") },
		configure: func(h *Handler, mux *http.ServeMux) guard {
			mux.HandleFunc("GET /nocloud/{file}", h.nocloud)
			return nil
		},
		crawl: func(c *crawler) {
			for _, f := range nocloudSeedFiles {
				c.leaf("/nocloud/" + f)
			}
		},
	})
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
		files, err := nocloudMetadata.get(h, rec)
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

// nocloudMetadata are the record's NoCloud meta-data, vendor-data and
// network-config (version 2).
var nocloudMetadata = metadataFiles(seed.NoCloud, "")
