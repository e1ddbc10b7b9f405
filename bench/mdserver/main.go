// Command mdserver-bench measures vminit's metadata server beside a bare
// net/http handler that serves a constant, on the same machine in the same
// run (docs/benchmarks.md, "## Metadata server"):
//
//	go run ./bench/mdserver -mode serve -n 100000      # for wrk (see run.sh)
//	go run ./bench/mdserver -mode keepalive -n 100000  # the same with Go's client
//	go run ./bench/mdserver -mode storm -vms 1000      # cloud-init boot storm
//	go run ./bench/mdserver -mode events -vms 1000     # the storm with and without first-boot events
//	go run ./bench/mdserver -mode startup -vminit BIN  # vminit serve's start-up on 100,000 spec files
//	go run ./bench/mdserver -mode onesource -requests 100000 -concurrency 32  # resets under the per-source limit
//
// To profile the server without the load generator in the same process,
// run "-mode serve -cpuprofile FILE" and point "-mode storm -md ADDR -bare
// ADDR" at the addresses it prints.
//
// The instances, the bare handler and the crawl are internal/mdbench's,
// shared with the testing.B benchmarks in package mdserver. Everything
// stays on loopback and stops by itself.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/vminit/vminit/internal/bench/mdbench"
	"github.com/vminit/vminit/mdserver"
)

// stop ends the CPU profile, if any.
var stop = func() {}

func main() {
	mode := flag.String("mode", "serve", "serve (for wrk), keepalive, storm, events (the storm with cloud-init reporting events), startup or onesource")
	n := flag.Int("n", 100000, "instances loaded")
	vms := flag.Int("vms", 1000, "VMs in the boot storm")
	conc := flag.Int("concurrency", 32, "VMs crawling at the same time in the storm; connections in keepalive")
	requests := flag.Int("requests", 200000, "requests per target in keepalive; connections in onesource")
	logTo := flag.String("log", "json", "audit log: json (formatted, written to io.Discard) or none")
	mdAddr := flag.String("md", "", "storm: an mdserver already serving (from -mode serve) instead of one in this process")
	bareAddr := flag.String("bare", "", "storm: the bare server already serving, with -md (none: only the mdserver is stormed)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	vminit := flag.String("vminit", "", "startup: the vminit binary to start")
	rounds := flag.Int("rounds", 3, "startup: starts measured with and without the cache; events: storms with and without events")
	decoded := flag.Bool("decoded", false, "hold every instance decoded, as servers did before 2026-11-26 (mdbench.LoadDecoded), for comparisons")
	clientName := flag.String("client", "raw", "storm client: raw (hand-written HTTP/1.1, the lightest) or nethttp (net/http's Client)")
	flag.Parse()
	client, err := mdbench.ParseClient(*clientName)
	if err != nil {
		log.Fatal(err)
	}
	// The profile starts after the instances are loaded: loading is
	// measured on its own, and would otherwise dominate a short run.
	profile := func() {
		if *cpuprofile == "" {
			return
		}
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		stop = func() { pprof.StopCPUProfile(); f.Close() }
	}
	defer func() { stop() }()
	ctx := context.Background()
	if *mode == "startup" {
		if err := startup(*vminit, *n, *rounds); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *mode == "events" {
		logger, err := mdbench.AuditLogger(*logTo)
		if err != nil {
			log.Fatal(err)
		}
		if err := eventsStorm(client, logger, *n, *vms, *conc, *rounds); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *mode == "onesource" {
		if err := oneSource(client, *requests, *conc); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *mode == "storm" && *mdAddr != "" {
		profile()
		for _, t := range []struct{ name, addr string }{{"bare", *bareAddr}, {"mdserver", *mdAddr}} {
			if t.addr == "" {
				continue
			}
			fmt.Printf("storm %-8s client=%v vms=%d concurrency=%d %v\n", t.name, client, *vms, *conc, mdbench.Storm(ctx, client, t.addr, 1, *vms, *conc))
		}
		return
	}
	fmt.Printf("gc_percent=%d (vminit serve's setting; GOGC overrides it)\n", mdserver.SetGC())
	logger, err := mdbench.AuditLogger(*logTo)
	if err != nil {
		log.Fatal(err)
	}
	m := mdserver.NewMetrics()
	load := mdbench.Load
	if *decoded {
		load = mdbench.LoadDecoded
	}
	ld, err := load(*n, mdserver.Options{Logger: logger, Metrics: m})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("instances=%d load=%v heap_per_instance=%.0fB (records, snapshot index, handler; nothing rendered yet)\n", ld.N, ld.Took.Round(time.Millisecond), ld.HeapPerInstance)
	md, stopMD, err := mdbench.Listen(ld.Handler, mdserver.NewServer(ld.Handler))
	if err != nil {
		log.Fatal(err)
	}
	defer stopMD()
	bare, stopBare, err := mdbench.Listen(mdbench.Bare(), mdbench.BareServer())
	if err != nil {
		log.Fatal(err)
	}
	defer stopBare()
	profile()
	switch *mode {
	case "serve":
		fmt.Printf("mdserver=http://%s/latest/user-data bare=http://%s/latest/user-data\n", md, bare)
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		select {
		case <-sig:
		case <-time.After(10 * time.Minute):
		}
		printMetrics(m, false)
	case "keepalive":
		for round := 1; round <= 3; round++ {
			for _, t := range []struct{ name, addr string }{{"bare", bare}, {"mdserver", md}} {
				fmt.Printf("keepalive round=%d %-8s conns=%d %v\n", round, t.name, *conc, mdbench.KeepAlive(ctx, "http://"+t.addr+"/latest/user-data", *conc, *requests))
			}
		}
	case "storm":
		for _, t := range []struct{ name, addr string }{{"bare", bare}, {"mdserver", md}} {
			fmt.Printf("storm %-8s client=%v vms=%d concurrency=%d %v\n", t.name, client, *vms, *conc, mdbench.Storm(ctx, client, t.addr, 1, *vms, *conc))
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Printf("heap after the storm: %.1f MiB (%d instances loaded, %d rendered)\n", float64(ms.HeapAlloc)/(1<<20), *n, *vms)
		printMetrics(m, true)
	default:
		log.Fatalf("-mode %q: want serve, keepalive, storm, startup or onesource", *mode)
	}
}

func printMetrics(m *mdserver.Metrics, requests bool) {
	var sb strings.Builder
	m.WriteTo(&sb)
	for _, l := range strings.Split(sb.String(), "\n") {
		if strings.HasPrefix(l, "vminit_mdserver_cache") || requests && strings.Contains(l, "requests_total") && !strings.HasPrefix(l, "#") {
			fmt.Println(l)
		}
	}
}
