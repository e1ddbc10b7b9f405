package bootreport

import (
	"errors"
	"net/url"
	"strings"
)

// The guests' write path, on the metadata listeners (package mdserver
// serves it, package mdserver/firstboot reads what comes):
//
//	POST /vminit/v1/events   one cloud-init reporting event, as its webhook handler posts it
//	POST /vminit/v1/report   a GuestReport (mdserver/firstboot): the agent's final word on its first boot
const (
	EventsPath = "/vminit/v1/events"
	ReportPath = "/vminit/v1/report"
)

// ReportUnit is the systemd unit the rendered first-boot data adds to post
// the GuestReport once first boot is over, for both agents.
const ReportUnit = "vminit-first-boot-report.service"

// ReportURLEnv names the environment variable through which ReportUnit
// hands its script the URL of ReportPath.
const ReportURLEnv = "VMINIT_REPORT_URL"

// ParseBaseURL checks a vminit server's base URL as given to --report-to
// or Options.ReportURL and returns it in canonical form, without a
// trailing slash: an absolute http or https URL with a host, and no user
// information (a password would end up in every guest's data and log),
// query or fragment (the event and report paths are appended to it).
func ParseBaseURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", errors.New("not a URL: " + strings.TrimPrefix(err.Error(), "parse "))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", errors.New("want an absolute http:// or https:// URL")
	case u.Host == "" || u.Opaque != "":
		return "", errors.New("want an absolute URL with a host, like http://192.0.2.1:8080")
	case u.User != nil:
		return "", errors.New("must not carry user information (user:password@): the guest data and its logs would show it")
	case u.RawQuery != "" || u.ForceQuery:
		return "", errors.New("must not have a query: the report paths are appended to it")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return "", errors.New("must not have a fragment")
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// EventsURL and ReportURL are where a guest posts, under a base URL that
// ParseBaseURL returned.
func EventsURL(base string) string { return base + EventsPath }

// ReportURL is where the guest's ReportUnit posts its GuestReport.
func ReportURL(base string) string { return base + ReportPath }
