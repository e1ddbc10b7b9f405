package mdserver

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

// A dialect is one protocol guests speak to the server. Each is declared
// once, in its own file, by a register call in the file's init that says
// all the handler needs to know of it (the way hegel's frontends each
// Configure a router):
//
//	func init() {
//		register(&dialect{
//			name:      "foo", // also in spec.Dialects
//			title:     "Foo",
//			paths:     []string{"/foo/config"},
//			owns:      func(p string) bool { return strings.HasPrefix(p, "/foo/") },
//			configure: func(h *Handler, mux *http.ServeMux) guard { mux.HandleFunc(…); return nil },
//			crawl:     func(c *crawler) { c.leaf("/foo/config") },
//			readers:   []DialectReader{{Agent: spec.AgentCloudInit, SMBIOS: …}},
//		})
//	}
//
// The programs that list dialects read them from here (Dialects): serve's
// help, the admin API's previews and vminit run's --dialect, so that a new
// dialect is its file, and its name in spec.Dialects for users to list it.
// The docs that list dialects by hand (docs/spec.md's `dialects` row,
// docs/run.md's --dialect table) fail TestDialectsDocumented until they
// name it.
//
// What it renders from a record is declared beside it, as package
// variables made by newPiece. The handler around it (identification, rate
// limit, spec.metadataServer's dialect choice, body limits, metrics, the
// audit line) is the same for every dialect.
type dialect struct {
	// name is the dialect's name in spec.metadataServer.dialects (one of
	// spec.Dialects: the spec validates users' lists, and cannot import
	// this package), in metrics and in audit lines.
	name string
	// title is what the dialect's guests' documentation calls it
	// ("EC2 IMDS"), and paths the paths it serves, a line each, as
	// serve's help lists them under the title.
	title string
	paths []string
	// readers are the agents vminit run can point at the dialect.
	readers []DialectReader
	// owns reports whether a request path (canonical or not, always
	// starting with "/") is the dialect's: the requests counted under its
	// name and refused when spec.metadataServer does not serve it. The
	// dialects' paths are disjoint; owns runs on every request, so it
	// must be cheap.
	owns func(path string) bool
	// configure adds the dialect's routes to the mux of a new handler h,
	// and returns its token rule (nil for none). State a dialect keeps for
	// one handler (EC2's token key) lives in what configure makes.
	configure func(h *Handler, mux *http.ServeMux) guard
	// crawl fetches what the dialect's guest reads, the way its agent
	// does (Handler.Crawl); nil: the dialect cannot be previewed.
	crawl func(c *crawler)
	// guestWrites marks the paths guests write to rather than read from
	// (events.go, the first-boot events and reports): served to every
	// instance whatever spec.metadataServer's dialects say (they hand out
	// no data), under a rate limit of their own (Options.WriteRate), not
	// counted as fetches of the first-boot tracker; not a spec dialect.
	guestWrites bool
	// maxBody bounds the dialect's PUT and POST bodies; 0:
	// Options.MaxBodyBytes.
	maxBody int64

	index int // position in dialects, for the handler's guards and metrics
}

// A guard is a dialect's token rule: 0 lets the request through to the
// dialect's routes, anything else is the status it is refused with (an
// empty body). It runs after spec.metadataServer's dialect choice.
type guard func(r *http.Request, rec *registry.Record) int

// DialectOther names requests no dialect owns, in metrics and audit
// lines.
const DialectOther = "other"

// otherDialect owns what no dialect does; it has no routes (the mux's
// own answers) and is always last in dialects.
var otherDialect = &dialect{name: DialectOther, owns: func(string) bool { return true }}

// dialects are the registered dialects in spec.Dialects order, then the
// guests' write path, then any other (a test's) by name, then
// otherDialect: the order of the metrics.
var dialects = []*dialect{otherDialect}

// sealed is set by the first NewHandler: dialects and pieces are declared
// at package initialisation, before any handler or cache entry exists.
var sealed atomic.Bool

// register adds d to the dialects every handler speaks. It panics on a
// mistake in the declaration, at package initialisation.
func register(d *dialect) {
	switch {
	case sealed.Load():
		panic("mdserver: dialect " + d.name + " registered after NewHandler")
	case d.name == "" || d.owns == nil || d.configure == nil:
		panic(fmt.Sprintf("mdserver: dialect %q needs a name, owns and configure", d.name))
	case !d.guestWrites && (d.title == "" || len(d.paths) == 0):
		panic(fmt.Sprintf("mdserver: dialect %q needs a title and paths (serve's help shows them)", d.name))
	case dialectNamed(d.name) != nil:
		panic("mdserver: dialect " + d.name + " registered twice")
	}
	known := dialects[:len(dialects)-1]
	i, _ := slices.BinarySearchFunc(known, d, compareDialects)
	dialects = slices.Insert(dialects, i, d)
	for i, d := range dialects {
		d.index = i
	}
}

// compareDialects orders dialects as spec.Dialects lists them, then the
// write path, then by name.
func compareDialects(a, b *dialect) int {
	rank := func(d *dialect) int {
		if i := slices.Index(spec.Dialects, d.name); i >= 0 {
			return i
		}
		if d.guestWrites {
			return len(spec.Dialects)
		}
		return len(spec.Dialects) + 1
	}
	if c := rank(a) - rank(b); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}

// dialectNamed returns the dialect called name, or nil.
func dialectNamed(name string) *dialect {
	for _, d := range dialects {
		if d.name == name {
			return d
		}
	}
	return nil
}

// dialectOf returns the dialect that owns path (otherDialect for none).
func dialectOf(path string) *dialect {
	if path == "" || path[0] != '/' {
		return otherDialect // an absolute-form request ("GET http://host HTTP/1.1") has an empty path
	}
	for _, d := range dialects {
		if d.owns(path) {
			return d
		}
	}
	return otherDialect
}

// auditMsg is the message of the dialect's audit lines.
func (d *dialect) auditMsg() string {
	if d.guestWrites {
		return "write"
	}
	return "fetch"
}

// configureDialects adds every dialect's routes to mux and keeps their
// token rules, by dialect index.
func (h *Handler) configureDialects(mux *http.ServeMux) {
	sealed.Store(true)
	h.guards = make([]guard, len(dialects))
	for _, d := range dialects {
		if d.configure != nil {
			h.guards[d.index] = d.configure(h, mux)
		}
	}
}

// DialectInfo is what the programs show of a dialect guests read:
// serve's help (Title, Paths), the admin API's previews (Crawl), vminit
// run's --dialect (Readers). They read it from Dialects, never a list of
// their own.
type DialectInfo struct {
	Name  string   // its name in spec.metadataServer.dialects
	Title string   // what its guests' documentation calls it: "EC2 IMDS"
	Paths []string // the paths it serves, a line each
	Crawl bool     // Handler.Crawl previews it
	// Readers are the agents vminit run can point at it, in the order
	// its --dialect lists them.
	Readers []DialectReader
}

// A DialectReader is an agent that reads a dialect, and how a QEMU guest
// is pointed at it.
type DialectReader struct {
	Agent string // spec.AgentCloudInit or spec.AgentIgnition
	// As is the agent's name for the dialect, vminit run's --dialect
	// (Ignition's platform ID: aws for EC2); "": the dialect's name.
	As string
	// SMBIOS returns the SMBIOS type 1 fields (QEMU's -smbios argument)
	// that make the agent choose the dialect with no kernel argument, for
	// the instance called name reaching the server at host (an address,
	// port 80). Nil: the agent needs no SMBIOS hint (Ignition's platform
	// comes from the kernel command line).
	SMBIOS func(host, name string) string
}

// Dialects are the dialects guests read, in spec.Dialects order, then
// any other (a test's) by name; not the guests' write path, which is not
// a dialect users choose.
func Dialects() []DialectInfo {
	var ds []DialectInfo
	for _, d := range dialects {
		if d.guestWrites || d == otherDialect {
			continue
		}
		ds = append(ds, DialectInfo{Name: d.name, Title: d.title, Paths: slices.Clone(d.paths),
			Crawl: d.crawl != nil, Readers: slices.Clone(d.readers)})
	}
	return ds
}
