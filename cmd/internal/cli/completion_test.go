package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/vminit/vminit/media"
	"github.com/vminit/vminit/seed"
)

// TestCompletionsFromTheLibrary: the values offered for --datasource and
// --fs are the library's lists (seed.Datasources, media.Formats).
func TestCompletionsFromTheLibrary(t *testing.T) {
	var datasources, formats []string
	for _, d := range seed.Datasources {
		datasources = append(datasources, string(d))
	}
	for _, f := range media.Formats {
		formats = append(formats, string(f))
	}
	for flag, want := range map[string][]string{"--datasource": datasources, "--fs": formats} {
		code, stdout, _ := run(t, "__complete", "build", "x.yaml", flag, "")
		got := strings.Split(strings.TrimSpace(stdout), "\n")
		if code != ExitOK || len(got) < 2 || !slices.Equal(got[:len(got)-1], want) {
			t.Errorf("%s completes to %q, want %q", flag, got, want)
		}
	}
}

// TestCompletionOfInstances: a shell completes the instances' names
// from the server the flags name, and --state's values one by one in its
// comma-separated list.
func TestCompletionOfInstances(t *testing.T) {
	f := newStatusFleet(t)
	complete := func(args ...string) []string {
		code, stdout, stderr := run(t, append([]string{"__complete"}, args...)...)
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		if code != ExitOK || len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], ":") {
			t.Fatalf("%v: %d %s %s", args, code, stdout, stderr)
		}
		return lines[:len(lines)-1]
	}
	if got := complete(append([]string{"instances", "status"}, append(f.flags, "web")...)...); !slices.Equal(got, []string{"web-1", "web-2", "web-3"}) {
		t.Errorf("status web<TAB>: %q", got)
	}
	if got := complete(append([]string{"instances", "preview"}, append(f.flags, "")...)...); !slices.Equal(got, []string{"db", "web-1", "web-2", "web-3"}) {
		t.Errorf("preview <TAB>: %q", got)
	}
	if got := complete(append([]string{"instances", "get", "db"}, append(f.flags, "")...)...); len(got) != 0 {
		t.Errorf("get db <TAB>: %q, want nothing: get takes one NAME", got)
	}
	if got := complete("instances", "status", "--state", "failed,st"); !slices.Equal(got, []string{"failed,stalled"}) {
		t.Errorf("--state failed,st<TAB>: %q", got)
	}
	if got := complete("instances", "status", "--state", ""); !slices.Equal(got, stateList()) {
		t.Errorf("--state <TAB>: %q, want %q", got, stateList())
	}
}
