// Command peers-bench serves the same fleet with vminit, tinkerbell/hegel
// and poseidon/matchbox, and a bare net/http handler for scale, and
// measures each server the same way (docs/benchmarks.md, "Beside the
// peers"; bench/peers/run.sh builds the peers at pinned versions and runs
// it):
//
//	peers-bench -n 10000 -vminit BIN -hegel BIN -matchbox BIN
//
// Each server runs alone, pinned to CPU 0 (taskset -c 0), its log sent to
// /dev/null; this process is the client and belongs on CPU 1 (run.sh pins
// it). For each server it reports: the time from exec to the first 200
// answer; keep-alive requests per second over -duration with -conns
// connections, once the server has gone idle after its first answer (the
// start-up work that follows it, such as vminit's deferred checks, is
// the "to idle" column); the server's CPU per request, from its
// utime+stime in /proc/PID/stat over the run (the requests still in
// flight at the end are waited for and counted); and its anonymous
// resident memory
// (RssAnon) after the run, less that of the same server with an empty
// fleet, per loaded instance. Everything is on 127.0.0.0/8 and stops by
// itself: a server is stopped when its run ends, and killed if it does
// not stop.
package main

import (
	"errors"
	"flag"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/vminit/vminit/internal/bench/mdbench"
)

func main() {
	n := flag.Int("n", 1000, "instances in the fleet")
	vminit := flag.String("vminit", "", "vminit binary (go build ./cmd/vminit)")
	hegel := flag.String("hegel", "", "hegel binary (run.sh builds tinkerbell/hegel)")
	matchbox := flag.String("matchbox", "", "matchbox binary (run.sh builds poseidon/matchbox)")
	duration := flag.Duration("duration", 5*time.Second, "keep-alive load per server")
	conns := flag.Int("conns", 16, "keep-alive connections")
	pin := flag.String("pin", "0", "CPU list the servers are pinned to (taskset -c); empty: not pinned")
	bare := flag.String("serve-bare", "", "internal: serve the bare handler on this address until stopped")
	flag.Parse()
	if *bare != "" {
		serveBare(*bare)
		return
	}
	if *vminit == "" {
		log.Fatal("-vminit BIN is required (go build -o BIN ./cmd/vminit)")
	}
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	servers := []server{bareServer(self), vminitServer(*vminit)}
	if *hegel != "" {
		servers = append(servers, hegelServer(*hegel))
	}
	if *matchbox != "" {
		servers = append(servers, matchboxServer(*matchbox))
	}
	b := bench{n: *n, duration: *duration, conns: *conns, pin: *pin}
	if err := b.run(servers); err != nil {
		log.Fatal(err)
	}
}

// serveBare is the bare handler of bench/mdserver (mdbench.Bare) in a
// process of its own, so that it is measured as the servers are.
func serveBare(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	srv := mdbench.BareServer()
	srv.Handler = mdbench.Bare()
	go func() {
		time.Sleep(10 * time.Minute) // stops by itself if never stopped
		os.Exit(0)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

// A server is how to start one of the measured servers on addr with a
// fleet, and the URL the machine of instance 0 (mdbench.Addr(0), the
// address the client connects from) fetches its data at.
type server struct {
	name, what string
	// reads is true of a server that loads nothing and reads its files
	// per request: its memory per instance is not reported.
	reads bool
	args  func(bin, addr string, f fleet) []string
	bin   string
	url   func(addr string) string
}

func bareServer(self string) server {
	return server{name: "bare net/http", what: "a constant (mdbench.Bare)", bin: self,
		args: func(_, addr string, _ fleet) []string { return []string{"-serve-bare", addr} },
		url:  func(addr string) string { return "http://" + addr + "/latest/user-data" }}
}

func vminitServer(bin string) server {
	return server{name: "vminit serve", what: "GET /latest/user-data (rendered cloud-config)", bin: bin,
		args: func(_, addr string, f fleet) []string {
			return []string{"serve", "--listen", addr, "--allow-loopback-instances", "--instances", f.specs}
		},
		url: func(addr string) string { return "http://" + addr + "/latest/user-data" }}
}

func hegelServer(bin string) server {
	return server{name: "hegel", what: "GET /2009-04-04/user-data (flat file)", bin: bin,
		args: func(_, addr string, f fleet) []string {
			return []string{"--backend", "flatfile", "--flatfile-path", f.hegelFile, "--http-addr", addr}
		},
		url: func(addr string) string { return "http://" + addr + "/2009-04-04/user-data" }}
}

func matchboxServer(bin string) server {
	return server{name: "matchbox", what: "GET /ignition?mac= (group, profile, Ignition files)", bin: bin, reads: true,
		args: func(_, addr string, f fleet) []string {
			return []string{"-address", addr, "-data-path", f.matchboxDir, "-assets-path", ""}
		},
		url: func(addr string) string { return "http://" + addr + "/ignition?mac=" + mac(0) }}
}

func init() {
	log.SetFlags(0)
	log.SetPrefix("peers-bench: ")
}
