package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vminit/vminit/internal/bench/mdbench"
	"github.com/vminit/vminit/mdserver"
)

// oneSource sends n requests, a new connection each, conc at a time, all
// from 127.0.0.1 (instance 0's address), to the handler behind the
// default connection limits (32 per source): the source never holds more
// than conc, so with conc ≤ 32 no connection may be reset. The client
// reads each response to the server's close (raw) or by its length and
// closes first (nethttp: net/http's client without keep-alive).
func oneSource(client mdbench.Client, n, conc int) error {
	m := mdserver.NewMetrics()
	ld, err := mdbench.Load(1, mdserver.Options{Logger: slog.New(slog.DiscardHandler), Metrics: m})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := mdserver.NewServer(ld.Handler)
	lim := mdserver.NewLimiter(mdserver.Limits{Known: ld.Handler.(*mdserver.Handler).Knows, Metrics: m})
	go srv.Serve(lim.Limit(srv, ln))
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/latest/meta-data/instance-id"
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Go(func() {
			hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			for next.Add(1) <= int64(n) {
				if !oneRequest(client, hc, ln.Addr().String(), url) {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("onesource client=%v connections=%d concurrency=%d failed=%d in %v\n", client, n, conc, failed.Load(), time.Since(start).Round(time.Millisecond))
	var sb strings.Builder
	m.WriteTo(&sb)
	for _, l := range strings.Split(sb.String(), "\n") {
		if strings.HasPrefix(l, "vminit_mdserver_connections_refused_total{") {
			fmt.Println(l)
		}
	}
	return nil
}

// oneRequest GETs url once on a new connection and reports whether a
// whole response came back.
func oneRequest(client mdbench.Client, hc *http.Client, addr, url string) bool {
	if client == mdbench.NetHTTP {
		res, err := hc.Get(url)
		if err != nil {
			return false
		}
		defer res.Body.Close()
		_, err = io.Copy(io.Discard, res.Body)
		return err == nil && res.StatusCode == 200
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /latest/meta-data/instance-id HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	b, err := io.ReadAll(c) // to the server's close; a reset is an error
	return err == nil && strings.HasPrefix(string(b), "HTTP/1.1 200 ")
}
