package webui

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// What the instance page shows of an instance beside its boot, and the
// page of what its guest is served (/ui/instances/{name}/served), both
// from the admin handler that mounts the UI (Options.Instance,
// Options.Served): the store's record and the admin API's preview, the
// same as `vminit instances get` and `vminit instances preview` show.

// Facts are an instance's record as its page shows it.
type Facts struct {
	// Addresses are those the server answers the instance's guest from
	// (spec.metadataServer.addresses, or a cluster's VMI claiming it).
	Addresses []string
	// Hostname and FQDN are the spec's (Hostname defaulted).
	Hostname, FQDN string
}

// Served is what a guest is served through one dialect: the admin API's
// preview (GET /v1/instances/{name}/preview?dialect=…).
type Served struct {
	Files    []ServedFile
	Warnings []string
}

// ServedFile is one file served; a binary one shows its size only.
type ServedFile struct {
	Path, Content string
	Binary        bool
	Size          int
}

// servedView is the served page's view.
type servedView struct {
	Title, Name, Href, Dialect string
	Dialects                   []option
	Served                     Served
}

func servedHref(name, dialect string) string {
	return instanceHref(name) + "/served?" + url.Values{"dialect": {dialect}}.Encode()
}

func (u *UI) served(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if u.opts.Served == nil || len(u.opts.Dialects) == 0 {
		u.problem(w, http.StatusNotFound, "This server does not show what guests are served.")
		return
	}
	if _, ok := u.src.Boot(name); !ok {
		u.problem(w, http.StatusNotFound, "No such instance: the store serves none called "+name+".")
		return
	}
	dialect := r.URL.Query().Get("dialect")
	if dialect == "" {
		dialect = u.opts.Dialects[0]
	}
	if !slices.Contains(u.opts.Dialects, dialect) {
		u.problem(w, http.StatusBadRequest, fmt.Sprintf("dialect=%q: want one of %s.", dialect, strings.Join(u.opts.Dialects, ", ")))
		return
	}
	s, err := u.opts.Served(r.Context(), name, dialect)
	if err != nil {
		u.problem(w, http.StatusBadRequest, err.Error())
		return
	}
	v := servedView{Title: name + " · served", Name: name, Href: instanceHref(name), Dialect: dialect, Served: s}
	for _, d := range u.opts.Dialects {
		v.Dialects = append(v.Dialects, option{Value: servedHref(name, d), Label: d, Selected: d == dialect})
	}
	u.render(w, http.StatusOK, "served", v)
}

// facts reads the instance's record for its page; nothing without
// Options.Instance.
func (u *UI) facts(name string) (Facts, bool) {
	if u.opts.Instance == nil {
		return Facts{}, false
	}
	return u.opts.Instance(name)
}
