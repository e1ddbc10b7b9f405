package mdserver

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// The OpenStack dialect: nova's metadata service, which cloud-init's
// OpenStack datasource, cloudbase-init and Ignition's openstack platform
// read. Its files are the ConfigDrive's (seed.Metadata), served over HTTP.
//
//	GET  /openstack , /openstack/{ver}/          version and file lists
//	GET  /openstack/{ver}/meta_data.json, user_data, network_data.json,
//	     vendor_data.json, vendor_data2.json
//	GET|POST /openstack/{ver}/password           write-once password

// DialectOpenStack is the OpenStack dialect's name.
const DialectOpenStack = spec.DialectOpenStack

func init() {
	register(&dialect{
		name:  DialectOpenStack,
		title: "OpenStack",
		paths: []string{"/openstack, /openstack/{version}/{meta_data.json,user_data,...}"},
		// cloud-init 22.4 picks OpenStack by the SMBIOS product name
		// (ds-identify's dscheck_OpenStack, DataSourceOpenStack's
		// detect_openstack); Ignition's openstack platform comes from
		// the kernel command line.
		readers: []DialectReader{
			{Agent: spec.AgentCloudInit, SMBIOS: func(_, _ string) string {
				return "type=1,manufacturer=OpenStack Foundation,product=OpenStack Nova"
			}},
			{Agent: spec.AgentIgnition},
		},
		owns: func(path string) bool { return strings.HasPrefix(path, "/openstack") },
		configure: func(h *Handler, mux *http.ServeMux) guard {
			mux.HandleFunc("GET /openstack", h.openstackVersions)
			mux.HandleFunc("GET /openstack/{$}", h.openstackVersions)
			mux.HandleFunc("GET /openstack/{ver}", h.openstack)
			mux.HandleFunc("GET /openstack/{ver}/{file...}", h.openstack)
			mux.HandleFunc("POST /openstack/{ver}/password", h.openstackPasswordPost)
			return nil
		},
		crawl: func(c *crawler) { c.tree("/openstack/latest/") },
	})
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

// MaxPasswordBytes bounds the OpenStack password a guest may store:
// nova's (four system-metadata chunks of 255 bytes). What cloudbase-init
// posts is the password encrypted with the first SSH key, in base64: 344
// bytes for an RSA-2048 key, 684 for RSA-4096.
const MaxPasswordBytes = 4 * 255

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
	files, err := openstackMetadata.get(h, rec)
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
		serveBytes(w, textPlain, h.password(rec))
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

// password is an incarnation's OpenStack password: what its guest posted.
type password struct {
	uid  string
	data []byte
}

// password returns what rec's incarnation posted, or nil: never what a
// predecessor of the same name did.
func (h *Handler) password(rec *registry.Record) []byte {
	if v, ok := h.passwords.Load(rec.Name); ok && v.(*password).uid == rec.UID {
		return v.(*password).data
	}
	return nil
}

// openstackPasswordPost stores the guest's (encrypted) password once per
// incarnation of the instance (it survives spec edits: cloudbase-init
// posts it once, at first boot); a second POST is 409, as in nova. A
// predecessor's password is replaced, never answered. The password lives
// in memory only.
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
	p := &password{uid: rec.UID, data: b}
	for {
		v, loaded := h.passwords.LoadOrStore(rec.Name, p)
		if !loaded {
			break
		}
		if old := v.(*password); old.uid == rec.UID {
			emptyStatus(w, http.StatusConflict)
			return
		} else if h.passwords.CompareAndSwap(rec.Name, old, p) {
			break
		}
	}
	emptyStatus(w, http.StatusOK)
}

// openstackMetadata are the record's ConfigDrive metadata files, by name.
var openstackMetadata = metadataFiles(seed.ConfigDrive, "openstack/latest/")
