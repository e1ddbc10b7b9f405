package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vminit/vminit/internal/bench/mdbench"
)

// startup measures what an operator waits for: vminit serve started on a
// directory of n spec files (mdbench.SpecFile), from exec until its
// metadata listener is up. The files are written and synced first, so the
// page cache holds them as on any restart; the first start has no
// start-up cache (a first start, or after an upgrade), the later ones
// --instances-cache written by the start before.
func startup(bin string, n, rounds int) error {
	if bin == "" {
		return errors.New("-mode startup needs -vminit BIN (go build -o BIN ./cmd/vminit)")
	}
	dir, err := os.MkdirTemp("", "vminit-startup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	specs, cache := filepath.Join(dir, "instances"), filepath.Join(dir, "instances.cache")
	if err := os.Mkdir(specs, 0o755); err != nil {
		return err
	}
	if err := mdbench.WriteSpecs(specs, n, mdbench.Addr); err != nil {
		return err
	}
	syscall.Sync()
	for r := range rounds {
		if err := start(bin, fmt.Sprintf("cold %d", r+1), n, "--instances", specs); err != nil {
			return err
		}
	}
	// This start runs until its deferred checks are done (a build that
	// defers them says so): only checked instances are cached, and a
	// server stopped before would leave the next starts cold.
	if err := start(bin, "writes the cache", n, "--instances", specs, "--instances-cache", cache); err != nil {
		return err
	}
	if fi, err := os.Stat(cache); err == nil {
		fmt.Printf("cache: %d B (%.0f B/instance)\n", fi.Size(), float64(fi.Size())/float64(n))
	}
	for r := range rounds {
		if err := start(bin, fmt.Sprintf("warm %d", r+1), n, "--instances", specs, "--instances-cache", cache); err != nil {
			return err
		}
	}
	return nil
}

// start runs vminit serve once, until it listens, then stops it with
// SIGTERM (which also writes the cache) and prints the wait, the load
// time vminit logged and the peak resident memory.
func start(bin, label string, n int, args ...string) error {
	// The instances are on 127.0.0.0/8 (mdbench.Addr).
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--allow-loopback-instances"}, args...)...)
	logs, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	kill := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	defer kill.Stop()
	var ready time.Duration
	var loaded struct {
		Msg      string
		Count    int
		Duration time.Duration // slog's JSON handler writes nanoseconds
		Checks   string        // "deferred": "dirstore: deferred checks done" follows
	}
	var checked time.Duration
	waitChecks := label == "writes the cache"
	sc := bufio.NewScanner(logs)
	for (ready == 0 || waitChecks && loaded.Checks == "deferred" && checked == 0) && sc.Scan() {
		var line struct{ Msg string }
		json.Unmarshal(sc.Bytes(), &line)
		switch line.Msg {
		case "instances loaded":
			json.Unmarshal(sc.Bytes(), &loaded)
		case "listening":
			ready = time.Since(begin)
		case "dirstore: deferred checks done":
			checked = time.Since(begin)
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	go func() {
		for sc.Scan() { // drain, so that the server never blocks on its log
		}
	}()
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("vminit serve: %v", err)
	}
	if ready == 0 || loaded.Count != n {
		return fmt.Errorf("vminit serve %s: loaded %d of %d instances, ready=%v", label, loaded.Count, n, ready)
	}
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB on Linux
	fmt.Printf("startup %-16s instances=%d listening_after=%v load=%v max_rss=%d MiB",
		label, n, ready.Round(time.Millisecond), loaded.Duration.Round(time.Millisecond), rss>>10)
	if checked > 0 {
		fmt.Printf(" checked_after=%v", checked.Round(time.Millisecond))
	}
	fmt.Println()
	return nil
}
