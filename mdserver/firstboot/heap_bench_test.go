package firstboot_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"github.com/vminit/vminit/internal/bench/mdbench"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// BenchmarkHeapPerBoot is the live heap one tracked first boot holds
// after cloud-init's full event stream (mdbench.CloudInitEvents, ≈40
// events) and the fetches of its crawl: docs/benchmarks.md, "First-boot
// events".
func BenchmarkHeapPerBoot(b *testing.B) {
	const boots = 1000
	var events []firstboot.Event
	for _, body := range mdbench.CloudInitEvents() {
		var ev struct {
			Name, Description, Result string
			EventType                 string `json:"event_type"`
		}
		if err := json.Unmarshal(body, &ev); err != nil {
			b.Fatal(err)
		}
		events = append(events, firstboot.Event{Kind: ev.EventType, Name: ev.Name, Result: ev.Result, Message: ev.Description})
	}
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		t := firstboot.New(firstboot.Options{})
		for i := range boots {
			name := fmt.Sprintf("vm-%05d", i)
			for _, p := range mdbench.CrawlPaths {
				t.Fetch(name, "uid", "cloud-init", "ec2", p)
			}
			for _, ev := range events {
				if err := t.Record(name, "uid", "cloud-init", ev); err != nil {
					b.Fatal(err)
				}
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/boots, "B/boot")
		if st := t.Brief("vm-00000", "uid", "cloud-init"); st.State != firstboot.Done {
			b.Fatalf("state %s", st.State)
		}
		runtime.KeepAlive(t)
	}
}
