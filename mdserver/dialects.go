package mdserver

import (
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/vminit/vminit/delivery"
)

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

const ignitionType = "application/vnd.coreos.ignition+json"

// configURL is this server's /ignition/config as the guest reached it.
func configURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/ignition/config"
}

func (h *Handler) ignitionConfig(w http.ResponseWriter, r *http.Request) {
	rec := recordOf(w)
	cfg, err := h.renderIgnition(rec)
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
	cfg, err := h.renderIgnition(rec)
	if h.failed(w, rec, err) {
		return
	}
	ptr, err := pointer(cfg, configURL(r))
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

// pointer builds the pointer config delivery.Fit builds for a config too
// large for its transport (same shape), unconditionally.
func pointer(cfg []byte, source string) ([]byte, error) {
	var v struct {
		Ignition struct{ Version string } `json:"ignition"`
	}
	if err := json.Unmarshal(cfg, &v); err != nil {
		return nil, err
	}
	sum := sha512.Sum512(cfg)
	return json.Marshal(map[string]any{"ignition": map[string]any{"version": v.Ignition.Version,
		"config": map[string]any{"replace": map[string]any{"source": source,
			"verification": map[string]any{"hash": "sha512-" + hex.EncodeToString(sum[:])}}}}})
}
