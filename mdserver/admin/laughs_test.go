package admin

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/laughs"
)

// TestPutLaughs: an admin PUT of the issue's attack (1 GB of aliases in
// spec.cloudInit.userData, or in the spec itself) is answered 422 naming
// the field, and nothing is stored.
func TestPutLaughs(t *testing.T) {
	store := newMemStore()
	srv := httptest.NewServer(NewHandler(store, Options{Token: adminToken, Logger: slog.New(slog.DiscardHandler)}))
	defer srv.Close()
	userData := "  cloudInit:\n    userData: |\n" + "      " + strings.ReplaceAll(strings.TrimSuffix(laughs.Issue(), "\n"), "\n", "\n      ") + "\n"
	inSpec := "  cloudInit:\n    metaData:\n" + laughs.Mapping(6, laughs.IssueScalar, laughs.IssueWidth)
	for name, tc := range map[string]struct {
		body string
		want []string
	}{
		"userData": {webSpec + userData, []string{`"line": 14`, `"field": "spec.cloudInit.userData"`, `"message": "#cloud-config line 4: aliases expand the document past 16777216 bytes at bootcmd[0]`}},
		"spec":     {webSpec + inSpec, []string{`"line": 17`, `"field": "spec.cloudInit.metaData.c[0]"`, `"message": "aliases expand the document past 16777216 bytes`}},
	} {
		code, body := call(t, srv, "PUT", "/v1/instances/web", adminToken, tc.body)
		for _, w := range tc.want {
			if code != 422 || !strings.Contains(body, w) {
				t.Errorf("%s: %d %s, want 422 and %s", name, code, body, w)
			}
		}
		if n := store.Snapshot().Len(); n != 0 {
			t.Errorf("%s: %d stored", name, n)
		}
	}
}
