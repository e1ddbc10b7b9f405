package cli

import (
	"bytes"
	"cmp"
	"strings"
	"testing"

	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/admin"
)

// TestHelpListsEveryDialect: the help texts that name the metadata
// server's dialects read the registry, so each registered dialect is in
// them by its title, paths and readers' names; a new dialect (the toy of
// mdserver's TestToyDialectInEveryProgram) needs no edit here.
func TestHelpListsEveryDialect(t *testing.T) {
	help := func(args ...string) string {
		var out, errs bytes.Buffer
		if code := Main(append(args, "--help"), &out, &errs); code != 0 {
			t.Fatalf("vminit %s --help: exit %d: %s", strings.Join(args, " "), code, errs.String())
		}
		return out.String()
	}
	root, serve, run, preview := help(), help("serve"), help("run"), help("instances", "preview")
	for _, d := range mdserver.Dialects() {
		if !strings.Contains(root, d.Title) {
			t.Errorf("vminit --help lacks %s", d.Title)
		}
		for _, p := range d.Paths {
			if !strings.Contains(serve, p) {
				t.Errorf("vminit serve --help lacks %s's %s", d.Title, p)
			}
		}
		for _, r := range d.Readers {
			if name := cmp.Or(r.As, d.Name); !strings.Contains(run, name) {
				t.Errorf("vminit run --help lacks %s's dialect %s", r.Agent, name)
			}
		}
	}
	for _, d := range admin.PreviewDialects {
		if !strings.Contains(preview, d) {
			t.Errorf("vminit instances preview --help lacks %s", d)
		}
	}
}
