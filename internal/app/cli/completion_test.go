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
