package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type bench struct {
	n        int
	duration time.Duration
	conns    int
	pin      string
}

// result is one server's run with one fleet.
type result struct {
	firstAnswer time.Duration // exec to the first answer (a 200 with a fleet)
	settled     time.Duration // exec to the end of start-up work (waitIdle)
	ok, failed  int64
	wall        time.Duration // the load, to its last answer
	cpu         time.Duration // the server's utime+stime over the load
	rssAnon     int64         // bytes, after the load
}

func (b bench) run(servers []server) error {
	dir, err := os.MkdirTemp("", "peers-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	empty, err := writeFleet(dir+"/empty", 0)
	if err != nil {
		return err
	}
	full, err := writeFleet(dir+"/full", b.n)
	if err != nil {
		return err
	}
	fmt.Printf("instances=%d duration=%v conns=%d servers on CPU %q\n\n", b.n, b.duration, b.conns, b.pin)
	fmt.Println("| server | serves | keep-alive req/s | server CPU per request | × bare's | RssAnon, fleet loaded | per loaded instance | exec to first answer | to idle |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	var bareCPU float64
	for _, s := range servers {
		base, err := b.once(s, empty, false)
		if err != nil {
			return fmt.Errorf("%s, empty fleet: %v", s.name, err)
		}
		r, err := b.once(s, full, true)
		if err != nil {
			return fmt.Errorf("%s, %d instances: %v", s.name, b.n, err)
		}
		perReq := float64(r.cpu.Microseconds()) / float64(max(r.ok, 1))
		if bareCPU == 0 {
			bareCPU = perReq
		}
		perInst := "–"
		if s.reads {
			perInst = "(reads files per request)"
		} else if b.n > 0 && s.bin != servers[0].bin {
			perInst = fmt.Sprintf("%.1f KB", float64(r.rssAnon-base.rssAnon)/float64(b.n)/1000)
		}
		fmt.Printf("| %s | %s | %.0f | %s | %.2f | %.1f MB | %s | %v | %v |\n", s.name, s.what,
			float64(r.ok)/r.wall.Seconds(), micros(perReq), perReq/bareCPU, float64(r.rssAnon)/1e6, perInst,
			r.firstAnswer.Round(time.Millisecond), r.settled.Round(10*time.Millisecond))
		if r.failed > 0 {
			fmt.Printf("|   | %d requests failed | | | | | | | |\n", r.failed)
		}
	}
	return nil
}

// once starts s with fleet f, waits for its first answer, loads it and
// stops it. Without a fleet (loaded false) any answer is the first, and
// failed requests are expected (the servers refuse an unknown machine).
func (b bench) once(s server, f fleet, loaded bool) (result, error) {
	var r result
	addr, err := freeAddr()
	if err != nil {
		return r, err
	}
	argv := append([]string{s.bin}, s.args(s.bin, addr, f)...)
	if b.pin != "" {
		argv = append([]string{"taskset", "-c", b.pin}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...) // output to /dev/null (nil)
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		return r, err
	}
	defer stop(cmd)
	url := s.url(addr)
	if err := waitFirst(url, loaded); err != nil {
		return r, err
	}
	r.firstAnswer = time.Since(begin)
	pid := cmd.Process.Pid
	if err := waitIdle(pid); err != nil {
		return r, err
	}
	r.settled = time.Since(begin)
	cpu0, err := cpuTime(pid)
	if err != nil {
		return r, err
	}
	r.ok, r.failed, r.wall = keepAlive(url, b.conns, b.duration)
	cpu1, err := cpuTime(pid)
	if err != nil {
		return r, err
	}
	r.cpu = cpu1 - cpu0
	r.rssAnon, err = rssAnon(pid)
	if loaded && r.failed > 0 && r.ok == 0 {
		return r, fmt.Errorf("every request failed")
	}
	return r, err
}

// micros formats a CPU time per request given in µs.
func micros(us float64) string {
	if us >= 10000 {
		return fmt.Sprintf("%.0f ms", us/1000)
	}
	return fmt.Sprintf("%.1f µs", us)
}

// stop ends a server with SIGTERM, and kills it if it has not stopped
// within 10 s.
func stop(cmd *exec.Cmd) {
	cmd.Process.Signal(syscall.SIGTERM)
	t := time.AfterFunc(10*time.Second, func() { cmd.Process.Kill() })
	cmd.Wait()
	t.Stop()
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitIdle waits, for at most three minutes, until the process has used
// no more than a tick of CPU in a quarter of a second: the start-up work
// a server does after its first answer (vminit checks the specs it
// deferred) is not counted in the requests' CPU.
func waitIdle(pid int) error {
	last, err := cpuTime(pid)
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); {
		time.Sleep(250 * time.Millisecond)
		now, err := cpuTime(pid)
		if err != nil {
			return err
		}
		if now-last <= 10*time.Millisecond {
			return nil
		}
		last = now
	}
	return fmt.Errorf("pid %d: still busy three minutes after its first answer", pid)
}

// waitFirst polls url, a new connection each time, until the server
// answers (with 200, when want200), for at most two minutes.
func waitFirst(url string, want200 bool) error {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		res, err := c.Get(url)
		if err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if !want200 || res.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("%s: no answer within two minutes", url)
}

// keepAlive GETs url over conns keep-alive connections until d has
// passed, then waits for the requests in flight; it returns how many were
// answered with 200, how many failed, and the time to the last answer.
func keepAlive(url string, conns int, d time.Duration) (ok, failed int64, wall time.Duration) {
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}
	defer tr.CloseIdleConnections()
	c := &http.Client{Timeout: time.Minute, Transport: tr}
	var nOK, nFailed atomic.Int64
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				if get(c, url) {
					nOK.Add(1)
				} else {
					nFailed.Add(1)
					time.Sleep(time.Millisecond) // a refusal is at once: do not spin
				}
			}
		}()
	}
	wg.Wait()
	return nOK.Load(), nFailed.Load(), time.Since(start)
}

func get(c *http.Client, url string) bool {
	req, _ := http.NewRequestWithContext(context.Background(), "GET", url, nil)
	res, err := c.Do(req)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	_, err = io.Copy(io.Discard, res.Body)
	return err == nil && res.StatusCode == 200
}

// cpuTime is the process's user and system time (/proc/PID/stat fields
// 14 and 15, in clock ticks of 1/100 s on Linux).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')') // the command name may hold spaces
	f := bytes.Fields(b[i+1:])       // f[0] is field 3, the state
	if i < 0 || len(f) < 13 {
		return 0, errors.New("/proc/PID/stat: unexpected format")
	}
	utime, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// rssAnon is the process's anonymous resident memory, in bytes
// (/proc/PID/status, RssAnon).
func rssAnon(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(l, []byte("RssAnon:")); ok {
			var kb int64
			if _, err := fmt.Sscanf(string(bytes.TrimSpace(v)), "%d kB", &kb); err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("/proc/PID/status has no RssAnon")
}
