// Command mdserver-bench measures vminit's metadata server beside a bare
// net/http handler that serves a constant, on the same machine in the same
// run:
//
//	go run ./bench/mdserver -mode serve -n 100000   # for wrk (see run.sh)
//	go run ./bench/mdserver -mode storm -vms 1000   # cloud-init boot storm
//
// Instance i is identified by 127.(1+i/65536).(i/256%256).(i%256) except
// instance 0, which owns 127.0.0.1 so that wrk (connecting from 127.0.0.1)
// reads its data. Everything stays on loopback and stops by itself.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/spec"
)

func addrOf(i int) netip.Addr {
	if i == 0 {
		return netip.MustParseAddr("127.0.0.1")
	}
	return netip.AddrFrom4([4]byte{127, byte(1 + i/65536), byte(i / 256 % 256), byte(i % 256)})
}

func instance(i int) *spec.Instance {
	name := fmt.Sprintf("vm-%06d", i)
	inst := &spec.Instance{APIVersion: spec.APIVersion, Kind: spec.Kind, Metadata: spec.Metadata{Name: name},
		Spec: spec.Spec{
			SSHAuthorizedKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGClPAdKZWvfQndmz2tRFw+JMNfVSzOuyotc5XUqX77L ops@example.com"},
			Users:             []spec.User{{Name: "ops", Sudo: "ALL=(ALL) NOPASSWD:ALL"}},
			Packages:          []string{"nginx"},
			MetadataServer:    &spec.MetadataServer{Addresses: []string{addrOf(i).String()}},
		}}
	inst.Default()
	return inst
}

// load builds n records and the handler, and reports time and heap.
func load(n int, logger *slog.Logger, m *mdserver.Metrics) (http.Handler, time.Duration, float64) {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	recs := make([]*mdserver.Record, n)
	for i := range recs {
		r, err := mdserver.NewRecord(instance(i), "1")
		if err != nil {
			log.Fatal(err)
		}
		recs[i] = r
	}
	store, err := mdserver.NewStaticStore(recs)
	if err != nil {
		log.Fatal(err)
	}
	h := mdserver.NewHandler(store, mdserver.Options{Logger: logger, Metrics: m})
	took := time.Since(start)
	recs = nil
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	return h, took, float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

var constant = []byte("#cloud-config\nusers: []\n")

func bare() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write(constant)
	})
}

func listen(h http.Handler, srv *http.Server) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv.Handler = h
	go srv.Serve(l)
	return l.Addr().String()
}

func main() {
	mode := flag.String("mode", "serve", "serve (for wrk) or storm")
	n := flag.Int("n", 100000, "instances loaded")
	vms := flag.Int("vms", 1000, "VMs in the boot storm")
	conc := flag.Int("concurrency", 32, "VMs crawling at the same time in the storm")
	logTo := flag.String("log", "discard", "audit log: discard (JSON handler writing to io.Discard) or none")
	flag.Parse()
	var logger *slog.Logger
	if *logTo == "none" {
		logger = slog.New(slog.DiscardHandler)
	} else {
		logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	m := mdserver.NewMetrics()
	h, took, perInst := load(*n, logger, m)
	fmt.Printf("instances=%d load=%v heap_per_instance=%.0fB (records, snapshot index, handler; nothing rendered yet)\n", *n, took.Round(time.Millisecond), perInst)
	switch *mode {
	case "serve":
		md := listen(h, mdserver.NewServer(h))
		b := listen(bare(), &http.Server{ReadHeaderTimeout: 5 * time.Second})
		fmt.Printf("mdserver=http://%s/latest/user-data bare=http://%s/latest/user-data\n", md, b)
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		select {
		case <-sig:
		case <-time.After(10 * time.Minute):
		}
		var sb strings.Builder
		m.WriteTo(&sb)
		for _, l := range strings.Split(sb.String(), "\n") {
			if strings.HasPrefix(l, "vminit_mdserver_cache") {
				fmt.Println(l)
			}
		}
	case "storm":
		md := listen(h, mdserver.NewServer(h))
		b := listen(bare(), &http.Server{ReadHeaderTimeout: 5 * time.Second})
		for _, target := range []struct{ name, addr string }{{"bare", b}, {"mdserver", md}} {
			storm(target.name, target.addr, *vms, *conc)
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Printf("heap after the storm: %.1f MiB (%d instances loaded, %d rendered)\n", float64(ms.HeapAlloc)/(1<<20), *n, *vms)
		var sb strings.Builder
		m.WriteTo(&sb)
		for _, l := range strings.Split(sb.String(), "\n") {
			if strings.HasPrefix(l, "vminit_mdserver_cache") || strings.Contains(l, `requests_total`) && !strings.HasPrefix(l, "#") {
				fmt.Println(l)
			}
		}
	}
}

// crawlPaths is cloud-init 22.4's request sequence on a non-AWS VM (the
// small tree of research §1.3) plus the 2021-03-23 network entries.
var crawlPaths = []string{
	"/2009-04-04/meta-data/instance-id", "/2021-03-23/meta-data/instance-id", "/2021-03-23/user-data",
	"/2021-03-23/meta-data/", "/2021-03-23/meta-data/block-device-mapping/", "/2021-03-23/meta-data/block-device-mapping/ami",
	"/2021-03-23/meta-data/block-device-mapping/root", "/2021-03-23/meta-data/placement/",
	"/2021-03-23/meta-data/placement/availability-zone", "/2021-03-23/meta-data/placement/region",
	"/2021-03-23/meta-data/public-keys/", "/2021-03-23/meta-data/public-keys/0/openssh-key",
	"/2021-03-23/meta-data/ami-id", "/2021-03-23/meta-data/ami-launch-index", "/2021-03-23/meta-data/ami-manifest-path",
	"/2021-03-23/meta-data/hostname", "/2021-03-23/meta-data/instance-action", "/2021-03-23/meta-data/instance-type",
	"/2021-03-23/meta-data/local-hostname", "/2021-03-23/meta-data/local-ipv4",
}

// storm runs vms simulated cloud-init crawls at once, each VM from its own
// address, each request on a new TCP connection.
func storm(name, addr string, vms, conc int) {
	var lat []time.Duration
	var mu sync.Mutex
	var errs atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, conc)
	for v := range vms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			src := addrOf(v + 1)
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}, Timeout: 5 * time.Second}
			c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
			mine := make([]time.Duration, 0, len(crawlPaths))
			for _, p := range crawlPaths {
				t0 := time.Now()
				res, err := c.Get("http://" + addr + p)
				if err != nil {
					errs.Add(1)
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					errs.Add(1)
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	slices.Sort(lat)
	q := func(f float64) time.Duration { return lat[int(f*float64(len(lat)-1))].Round(time.Microsecond) }
	fmt.Printf("storm %-8s vms=%d concurrency=%d requests=%d errors=%d wall=%v req/s=%.0f p50=%v p99=%v max=%v\n",
		name, vms, conc, len(lat), errs.Load(), wall.Round(time.Millisecond), float64(len(lat))/wall.Seconds(), q(0.5), q(0.99), lat[len(lat)-1].Round(time.Microsecond))
}
