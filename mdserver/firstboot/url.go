package firstboot

import (
	"errors"
	"net/url"
	"strings"
)

// The agents' side of the wire contract: what the renderers (cloudinit,
// ignition) put in a guest's first-boot data so that it reports to a
// vminit server at a base URL (`--report-to URL`, or the server that
// served the data).

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
