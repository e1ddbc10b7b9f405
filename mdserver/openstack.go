package mdserver

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/seed"
)

// The OpenStack dialect: nova's metadata service, which cloud-init's
// OpenStack datasource, cloudbase-init and Ignition's openstack platform
// read. Its files are the ConfigDrive's (seed.Metadata), served over HTTP.
//
//	GET  /openstack , /openstack/{ver}/          version and file lists
//	GET  /openstack/{ver}/meta_data.json, user_data, network_data.json,
//	     vendor_data.json, vendor_data2.json
//	GET|POST /openstack/{ver}/password           write-once password

func (h *Handler) openstackRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /openstack", h.openstackVersions)
	mux.HandleFunc("GET /openstack/{$}", h.openstackVersions)
	mux.HandleFunc("GET /openstack/{ver}", h.openstack)
	mux.HandleFunc("GET /openstack/{ver}/{file...}", h.openstack)
	mux.HandleFunc("POST /openstack/{ver}/password", h.openstackPasswordPost)
}

// OpenStack versions served (nova's list up to 2018-08-27, the newest
// cloud-init 22.4 knows), oldest first.
var openstackVersionList = []string{"2012-08-10", "2013-04-04", "2013-10-17", "2015-10-15", "2016-06-30", "2016-10-06", "2017-02-22", "2018-08-27", "latest"}

var openstackVersionsBody = []byte(strings.Join(openstackVersionList, "\n"))

// openstackFiles are the files of a version directory and the version
// that introduced each.
var openstackFiles = []struct{ name, since string }{
	{"meta_data.json", "2012-08-10"},
	{"user_data", "2012-08-10"},
	{"password", "2013-04-04"},
	{"vendor_data.json", "2013-10-17"},
	{"network_data.json", "2015-10-15"},
	{"vendor_data2.json", "2016-10-06"},
}

// MaxPasswordBytes bounds the OpenStack password a guest may store.
const MaxPasswordBytes = 256

func openstackHas(ver, file string) bool {
	for _, f := range openstackFiles {
		if f.name == file {
			return ver == "latest" || ver >= f.since
		}
	}
	return false
}

func knownOpenstackVersion(v string) bool {
	for _, k := range openstackVersionList {
		if k == v {
			return true
		}
	}
	return false
}

func (h *Handler) openstackVersions(w http.ResponseWriter, r *http.Request) {
	serveBytes(w, textPlain, openstackVersionsBody)
}

func (h *Handler) openstack(w http.ResponseWriter, r *http.Request) {
	ver, file := r.PathValue("ver"), r.PathValue("file")
	if !knownOpenstackVersion(ver) {
		emptyStatus(w, http.StatusNotFound)
		return
	}
	rec := recordOf(w)
	files, err := h.openstackFiles(rec)
	if h.failed(w, rec, err) {
		return
	}
	switch {
	case file == "":
		var names []string
		for _, f := range openstackFiles {
			if openstackHas(ver, f.name) && (f.name != "network_data.json" || files[f.name] != nil) {
				names = append(names, f.name)
			}
		}
		serveBytes(w, textPlain, []byte(strings.Join(names, "\n")))
	case !openstackHas(ver, file):
		emptyStatus(w, http.StatusNotFound)
	case file == "user_data":
		b, ctype, err := h.userData(r, rec, "openstack")
		if h.failed(w, rec, err) {
			return
		}
		serveBytes(w, ctype, b)
	case file == "password":
		v, _ := h.passwords.Load(rec.Name)
		b, _ := v.([]byte)
		serveBytes(w, textPlain, b)
	case file == "vendor_data2.json":
		serveBytes(w, "application/json", []byte("{}"))
	default:
		b := files[file]
		if b == nil && file == "vendor_data.json" {
			b = []byte("{}")
		}
		if b == nil {
			emptyStatus(w, http.StatusNotFound)
			return
		}
		serveBytes(w, "application/json", b)
	}
}

// openstackPasswordPost stores the guest's (encrypted) password once; a
// second POST is 409, as in nova. The password lives in memory only.
func (h *Handler) openstackPasswordPost(w http.ResponseWriter, r *http.Request) {
	if !knownOpenstackVersion(r.PathValue("ver")) || !openstackHas(r.PathValue("ver"), "password") {
		emptyStatus(w, http.StatusNotFound)
		return
	}
	rec := recordOf(w)
	b, err := io.ReadAll(io.LimitReader(r.Body, MaxPasswordBytes+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			emptyStatus(w, http.StatusRequestEntityTooLarge)
			return
		}
		emptyStatus(w, http.StatusBadRequest)
		return
	}
	if len(b) > MaxPasswordBytes {
		emptyStatus(w, http.StatusRequestEntityTooLarge)
		return
	}
	if _, loaded := h.passwords.LoadOrStore(rec.Name, b); loaded {
		emptyStatus(w, http.StatusConflict)
		return
	}
	emptyStatus(w, http.StatusOK)
}

// openstackFiles renders (once) the record's ConfigDrive metadata files,
// by name.
func (h *Handler) openstackFiles(rec *registry.Record) (map[string][]byte, error) {
	e := h.entry(rec)
	return h.metadataFiles(rec, e, &e.openstack, seed.ConfigDrive, "openstack/latest/")
}
