package admin

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/internal/bench/mdbench"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// BenchmarkFleetServer is the server's memory under the load: a
// fleet of 500 guests, honest or hostile (TestHostileFleetBounded's), one
// guest posting on, 8 fleet readers (Client.Boots, every page) and 4
// watchers (Client.WatchBoots) over loopback HTTP. Each iteration is one
// read by each reader while the guest posts 20 events. It reports the
// heap each guest left (heap-B/guest), the bytes of one GET /v1/boots
// (read-B), the peak of the live heap sampled every 2 ms (peak-heap-MB)
// and the process's peak RSS (peak-RSS-MB, reset as the load starts;
// run each fleet in a process of its own for it to be the fleet's):
// docs/benchmarks.md, "A hostile fleet".
func BenchmarkFleetServer(b *testing.B) {
	for _, tc := range []struct {
		name  string
		guest func(*guestFleet, testing.TB, int)
	}{{"honest", (*guestFleet).honest}, {"hostile", (*guestFleet).hostile}} {
		b.Run(tc.name, func(b *testing.B) {
			const guests, readers, watchers = 500, 8, 4
			g := newGuestFleet(b, guests)
			perGuest := g.boot(b, tc.guest)
			srv := httptest.NewServer(NewHandler(g.store, Options{Token: adminToken, Logger: slog.New(slog.DiscardHandler), Metadata: g.md}))
			defer srv.Close()
			client := &Client{URL: srv.URL, Token: adminToken, HTTP: srv.Client()}
			_, body := rawBoots(b, srv)

			debug.FreeOSMemory()
			resetPeakRSS()
			peak, stopSampling := sampleHeap()
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for range watchers {
				wg.Go(func() {
					client.WatchBoots(ctx, firstboot.Filter{}, func(firstboot.Summary) error { return nil })
				})
			}
			// The writer: guest 0, as it booted (hostile: maximal events;
			// honest: cloud-init's, again).
			honest := mdbench.CloudInitEvents()
			k := 0
			post := func() {
				for range 20 {
					body := string(honest[k%len(honest)])
					if tc.name == "hostile" {
						body = hostileEvent(0, 100+k)
					}
					g.post(b, 0, bootreport.EventsPath, body)
					k++
				}
			}
			for b.Loop() {
				var reads sync.WaitGroup
				for range readers {
					reads.Go(func() {
						if _, err := client.Boots(ctx, firstboot.Filter{}); err != nil {
							b.Error(err)
						}
					})
				}
				post()
				reads.Wait()
			}
			cancel()
			wg.Wait()
			b.StopTimer()
			stopSampling()
			b.ReportMetric(float64(perGuest), "heap-B/guest")
			b.ReportMetric(float64(len(body)), "read-B")
			b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MB")
			if rss := peakRSS(); rss > 0 {
				b.ReportMetric(float64(rss)/(1<<20), "peak-RSS-MB")
			}
		})
	}
}

// rawBoots is one GET /v1/boots, as it comes.
func rawBoots(b *testing.B, srv *httptest.Server) (int, string) {
	req := httptest.NewRequest("GET", srv.URL+"/v1/boots", nil)
	req.RequestURI = ""
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := srv.Client().Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.String()
}

// sampleHeap samples the heap's live objects every 2 ms until stop is
// called, keeping the peak.
func sampleHeap() (peak *atomic.Uint64, stop func()) {
	peak = new(atomic.Uint64)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return peak, func() { close(done); <-finished }
}

// resetPeakRSS resets the process's peak RSS (Linux's VmHWM), so that
// peakRSS is the load's.
func resetPeakRSS() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is the process's peak RSS in bytes, 0 where /proc does not
// say.
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			kb, _ := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))), 10, 64)
			return kb << 10
		}
	}
	return 0
}
