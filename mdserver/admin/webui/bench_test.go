package webui_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/vminit/vminit/mdserver/admin/webui"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// BenchmarkFleetPage: one page of the fleet (the default 1,000 rows) of
// a fleet of 1,000 and of 100,000 instances, half of them fetched and a
// tenth running, sorted by name and by elapsed time. docs/first-boot-status.md
// quotes it:
//
//	go test ./mdserver/admin/webui -run '^$' -bench FleetPage -benchtime 20x
func BenchmarkFleetPage(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		f := newFleet(b, numbered(n))
		for i, in := range numbered(n) {
			if i%2 == 1 {
				f.fetch(in.name, in.agent, 1)
			}
			if i%10 == 1 {
				f.event(b, in.name, firstboot.KindStart, "init-network/config-ssh", "", "")
			}
		}
		ui := f.ui(webui.Options{})
		for _, q := range []string{"", "?sort=-elapsed"} {
			b.Run(fmt.Sprintf("%d%s", n, q), func(b *testing.B) {
				req := httptest.NewRequest(http.MethodGet, "/ui/"+q, nil)
				req.Header.Set("Authorization", "Bearer "+token)
				var size int
				for b.Loop() {
					w := httptest.NewRecorder()
					ui.ServeHTTP(w, req)
					if w.Code != http.StatusOK {
						b.Fatal(w.Code)
					}
					size = w.Body.Len()
				}
				b.ReportMetric(float64(size), "bytes/page")
			})
		}
	}
}
