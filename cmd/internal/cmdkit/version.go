package cmdkit

import (
	"fmt"
	"runtime/debug"
)

// Set by release builds (make dist) with -ldflags -X, because those build
// with -buildvcs=false and -trimpath (the same bytes whatever the checkout):
// the version (git describe), the commit and the commit's date (not the
// clock, so that two builds of a commit are identical).
var (
	stampedVersion string
	stampedCommit  string
	stampedDate    string
)

// Version describes this binary: the stamped version, commit and
// date of a release build; otherwise from its build information: the
// module version (a tag for go install …@vX, "(devel)" for a build from a
// clone), the VCS revision and time it was built from, whether the tree
// had uncommitted changes. The Go version ends both.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "vminit (no build information)"
	}
	if stampedVersion != "" {
		return fmt.Sprintf("vminit %s (%s, %s) %s", stampedVersion, stampedCommit, stampedDate, bi.GoVersion)
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, when, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = ", modified"
			}
		}
	}
	out := "vminit " + v
	if rev != "" {
		out += fmt.Sprintf(" (%s, %s%s)", rev, when, dirty)
	}
	return out + " " + bi.GoVersion
}
