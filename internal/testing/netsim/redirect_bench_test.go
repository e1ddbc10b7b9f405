package netsim_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/bench/mdbench"
	"github.com/vminit/vminit/internal/testing/netsim"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/intercept"
)

// BenchmarkRedirect measures what each of mdserver/intercept's data paths
// costs a guest against asking the node agent directly
// (docs/benchmarks.md, "Through the redirect"). On the simulated node
// (package doc: no loopback anywhere on the path), two routed
// virt-launcher pods, each with a guest behind KubeVirt's masquerade; in
// the node's namespace at its address, the node agent: vminit's real
// metadata handler and server (mdserver.NewHandler, NewServer, the audit
// log formatted and discarded, metrics on) over two instances, one at
// each pod IP. A net/http client in a guest's namespace keeps C
// connections open and GETs /latest/user-data over them:
//
//   - direct: guest A to the agent's node address, 172.31.0.10:8775;
//   - host: guest A to 169.254.169.254:80, redirected by the host table
//     (intercept.Host) in the node's namespace;
//   - pod: guest B to 169.254.169.254:80, redirected by the pod table
//     (intercept.Pod, what vminit-cni installs) in its pod's namespace.
//
// Each op is one request; the three paths take turns in rounds of 2,000
// requests, so a noisy neighbour falls on all three alike, and each
// reports its requests a second (all its rounds' requests over their
// time) and its latencies' p50 and p99 over all its rounds. Every answer
// must be the asking guest's own instance's. Root and ip(8) are needed
// (skipped without them):
//
//	go test -run '^$' -bench Redirect -benchtime 60000x -count 5 ./internal/testing/netsim
func BenchmarkRedirect(b *testing.B) {
	node := netsim.NewNode(b)
	a := node.AddPod(b, "virt-launcher-vm-a-x8k2p", false)
	pb := node.AddPod(b, "virt-launcher-vm-b-q7w4m", false)
	logger, err := mdbench.AuditLogger("json")
	if err != nil {
		b.Fatal(err)
	}
	ld, err := mdbench.LoadAt([]netip.Addr{a.IP, pb.IP}, mdserver.Options{Logger: logger, Metrics: mdserver.NewMetrics()})
	if err != nil {
		b.Fatal(err)
	}
	var l net.Listener
	if err := node.NS.Do(func() (err error) {
		l, err = net.Listen("tcp", agentAddr.String())
		return err
	}); err != nil {
		b.Fatal(err)
	}
	srv := mdserver.NewServer(ld.Handler)
	go srv.Serve(l)
	b.Cleanup(func() { srv.Close() })

	host, err := intercept.Host(agentAddr, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := host.Install(node.NS.Fd()); err != nil {
		b.Fatal(err)
	}
	pod, err := intercept.Pod(agentAddr)
	if err != nil {
		b.Fatal(err)
	}
	if err := pod.Install(pb.NS.Fd()); err != nil {
		b.Fatal(err)
	}
	const userData = "/latest/user-data"
	paths := []struct {
		name  string
		guest *netsim.Pod
		url   string
	}{
		{"direct", a, "http://" + agentAddr.String() + userData},
		{"host", a, "http://" + intercept.MetadataAddr.String() + userData},
		{"pod", pb, "http://" + intercept.MetadataAddr.String() + userData},
	}
	// Each guest's own instance (SpecFile: its motd names it).
	for i, p := range paths {
		want := fmt.Sprintf("welcome to vm-%06d", map[*netsim.Pod]int{a: 0, pb: 1}[p.guest])
		if body, err := get(p.guest.Guest, p.url); err != nil || !strings.Contains(body, want) {
			b.Fatalf("%s: GET %s from %s: %q, %v; want its instance's user-data (%q)", paths[i].name, p.url, p.guest.Name, body, err, want)
		}
	}
	for _, conns := range []int{1, 16} {
		b.Run(fmt.Sprintf("c=%d", conns), func(b *testing.B) {
			clients := make([]*http.Client, len(paths))
			for i, p := range paths {
				clients[i] = keepAliveClient(p.guest.Guest, conns)
				defer clients[i].CloseIdleConnections()
				mdbench.KeepAliveWith(context.Background(), clients[i], p.url, conns, 200) // connections up
			}
			lat := make([][]time.Duration, len(paths))
			wall := make([]time.Duration, len(paths))
			const round = 2000
			b.ResetTimer()
			for done := 0; done < b.N; done += round {
				for i, p := range paths {
					r := mdbench.KeepAliveWith(context.Background(), clients[i], p.url, conns, min(round, b.N-done))
					if r.Errors > 0 {
						b.Fatalf("%s: %d of %d requests failed; first: %v", p.name, r.Errors, r.Requests, r.FirstErr)
					}
					lat[i] = append(lat[i], r.Latencies...)
					wall[i] += r.Wall
				}
			}
			b.StopTimer()
			for i, p := range paths {
				slices.Sort(lat[i])
				q := func(f float64) float64 { return float64(lat[i][int(f*float64(len(lat[i])-1))].Nanoseconds()) / 1e3 }
				b.ReportMetric(float64(len(lat[i]))/wall[i].Seconds(), p.name+"-req/s")
				b.ReportMetric(q(0.5), p.name+"-p50-µs")
				b.ReportMetric(q(0.99), p.name+"-p99-µs")
			}
			b.ReportMetric(0, "ns/op") // an op is a request on each path in turn: its time says nothing alone
		})
	}
}

// keepAliveClient is an HTTP/1.1 client whose connections are opened from
// the namespace n and kept, conns of them.
func keepAliveClient(n *netsim.NS, conns int) *http.Client {
	d := &net.Dialer{Timeout: time.Second}
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			Proxy: nil, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns,
			DialContext: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
				err = n.Do(func() error {
					c, err = d.DialContext(ctx, network, addr)
					return err
				})
				return c, err
			},
		},
	}
}
