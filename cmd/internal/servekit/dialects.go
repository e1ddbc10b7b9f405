package servekit

import (
	"fmt"
	"strings"

	"github.com/vminit/vminit/mdserver"
)

// serve's help lists the metadata server's dialects from its registry
// (mdserver.Dialects), so that a new dialect is its file in package
// mdserver, with no edit here.

// dialectTitles are the dialects' titles, for serve's summary line:
// "EC2 IMDS, OpenStack, NoCloud-net, Ignition".
func dialectTitles() string {
	var titles []string
	for _, d := range mdserver.Dialects() {
		titles = append(titles, d.Title)
	}
	return strings.Join(titles, ", ")
}

// dialectPaths lists each dialect's paths under its title, for serve's
// help, a line each, indented by two spaces.
func dialectPaths() string {
	var b strings.Builder
	for _, d := range mdserver.Dialects() {
		for i, p := range d.Paths {
			title := ""
			if i == 0 {
				title = d.Title
			}
			fmt.Fprintf(&b, "  %-12s %s\n", title, p)
		}
	}
	return b.String()
}
