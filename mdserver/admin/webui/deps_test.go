package webui_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBrowserDriverNotLinked: chromedp drives the browser in the tests
// only; no binary, and not the UI itself, links it.
func TestBrowserDriverNotLinked(t *testing.T) {
	pkgs := []string{"github.com/vminit/vminit/mdserver/admin/webui", "github.com/vminit/vminit/cmd/..."}
	out, err := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...).Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	if !strings.Contains(string(out), "github.com/vminit/vminit/mdserver/admin/webui\n") {
		t.Fatalf("go list -deps does not list webui itself: is its output read right?\n%s", out)
	}
	for p := range strings.FieldsSeq(string(out)) {
		if strings.HasPrefix(p, "github.com/chromedp/") {
			t.Errorf("%s is linked outside the tests", p)
		}
	}
}
