package main

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"time"

	"github.com/vminit/vminit/internal/bench/mdbench"
	"github.com/vminit/vminit/mdserver"
)

// eventsStorm is first-boot status's benchmark: the boot storm of vms VMs, each
// also posting a cloud-init first boot's reporting events (≈40) between
// its metadata requests, set beside the same storm without events. Each
// run has a fresh server (every VM's first request renders), and the
// order alternates between rounds, as the machine's speed drifts. The
// figures compared are the GETs' latencies; the heap each boot's status
// adds is the difference of the live heaps after the two storms.
func eventsStorm(client mdbench.Client, logger *slog.Logger, n, vms, conc, rounds int) error {
	ctx := context.Background()
	events := mdbench.CloudInitEvents()
	var p50, p99 [2][]time.Duration
	var heap [2][]float64
	for round := range rounds {
		for k := range 2 {
			withEvents := (k+round)%2 == 1
			ld, err := mdbench.Load(n, mdserver.Options{Logger: logger})
			if err != nil {
				return err
			}
			addr, stop, err := mdbench.Listen(ld.Handler, mdserver.NewServer(ld.Handler))
			if err != nil {
				return err
			}
			var evs [][]byte
			if withEvents {
				evs = events
			}
			gets, posts := mdbench.StormEvents(ctx, client, addr, 1, vms, conc, evs)
			stop()
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			i := 0
			if withEvents {
				i = 1
			}
			p50[i], p99[i] = append(p50[i], gets.Quantile(0.5)), append(p99[i], gets.Quantile(0.99))
			heap[i] = append(heap[i], float64(ms.HeapAlloc))
			fmt.Printf("events round=%d events=%-5v gets: %v\n", round+1, withEvents, gets)
			if withEvents {
				fmt.Printf("events round=%d posts: %v\n", round+1, posts)
			}
			if gets.Errors+posts.Errors > 0 {
				return fmt.Errorf("round %d: %d GETs and %d posts failed; first: %v %v", round+1, gets.Errors, posts.Errors, gets.FirstErr, posts.FirstErr)
			}
			runtime.KeepAlive(ld)
		}
	}
	med := func(d []time.Duration) time.Duration { d = slices.Clone(d); slices.Sort(d); return d[len(d)/2] }
	medf := func(d []float64) float64 { d = slices.Clone(d); slices.Sort(d); return d[len(d)/2] }
	fmt.Printf("events summary vms=%d events_per_vm=%d rounds=%d: median p50 %v → %v (%.2fx), median p99 %v → %v (%.2fx); heap per tracked boot %.0f B\n",
		vms, len(events), rounds, med(p50[0]), med(p50[1]), float64(med(p50[1]))/float64(med(p50[0])),
		med(p99[0]), med(p99[1]), float64(med(p99[1]))/float64(med(p99[0])),
		(medf(heap[1])-medf(heap[0]))/float64(vms))
	return nil
}
