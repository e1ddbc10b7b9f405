package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/vminit/vminit/media"
	"github.com/vminit/vminit/seed"
)

// TestCompletionsFromTheLibrary: the values offered for --datasource and
// --fs are the library's lists, and every one of them is accepted.
func TestCompletionsFromTheLibrary(t *testing.T) {
	for flag, want := range map[string][]string{"--datasource": names(seed.Datasources), "--fs": names(media.Formats)} {
		code, stdout, _ := run(t, "__complete", "build", "x.yaml", flag, "")
		got := strings.Split(strings.TrimSpace(stdout), "\n")
		if code != ExitOK || len(got) < 2 || !slices.Equal(got[:len(got)-1], want) {
			t.Errorf("%s completes to %q, want %q", flag, got, want)
		}
	}
	for _, ds := range seed.Datasources {
		if _, err := parseDatasource(string(ds)); err != nil {
			t.Errorf("--datasource %s: %v", ds, err)
		}
	}
}
