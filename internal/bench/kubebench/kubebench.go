// Package kubebench holds the fixtures of the Kubernetes benchmarks: many
// Instance objects created through a real API server, and the numbers a
// benchmark reports about processes (resident memory).
package kubebench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/vminit/vminit/kube/api/v1alpha1"
)

// Count is how many Instances the benchmarks create: 10,000, or
// $VMINIT_BENCH_INSTANCES.
func Count() int {
	n := 10000
	if v := os.Getenv("VMINIT_BENCH_INSTANCES"); v != "" {
		fmt.Sscan(v, &n)
	}
	return n
}

// Instance is the i-th benchmark Instance: a typical small spec (a user
// with a key, a file, a command, a static address), each on an address of
// its own in 10.0.0.0/8.
func Instance(ns string, i int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "vminit.dev/v1alpha1", "kind": "Instance",
		"metadata": map[string]any{"name": fmt.Sprintf("vm-%05d", i), "namespace": ns},
		"spec": map[string]any{
			"users": []any{map[string]any{"name": "ops", "sudo": "ALL=(ALL) NOPASSWD:ALL",
				"sshAuthorizedKeys": []any{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ops@example"}}},
			"files":          []any{map[string]any{"path": "/etc/motd", "content": fmt.Sprintf("vm %d\n", i)}},
			"commands":       []any{"systemctl enable --now app"},
			"metadataServer": map[string]any{"addresses": []any{Address(i)}},
		}}}
}

// Address is the i-th Instance's address.
func Address(i int) string { return fmt.Sprintf("10.%d.%d.%d", i/62500, i/250%250, i%250+1) }

// Create creates n Instances in ns with workers parallel clients and
// returns how long it took: the API server's own cost of the objects, what
// a controller reconciling them is compared with.
func Create(tb testing.TB, res dynamic.NamespaceableResourceInterface, ns string, n, workers int) time.Duration {
	tb.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if _, err := res.Namespace(ns).Create(context.Background(), Instance(ns, i), metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	return d
}

// RSS returns a process's resident set size and its peak (VmHWM), in MiB.
func RSS(tb testing.TB, pid int) (cur, peak float64) {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		var kib float64
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			fmt.Sscan(v, &kib)
			cur = kib / 1024
		}
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			fmt.Sscan(v, &kib)
			peak = kib / 1024
		}
	}
	return cur, peak
}

// CPU returns the CPU time a process has used (user and system), from
// /proc/PID/stat.
func CPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	var utime, stime int64
	fmt.Sscan(f[11], &utime)
	fmt.Sscan(f[12], &stime)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// Resource is the Instance resource of a dynamic client.
func Resource(dyn dynamic.Interface) dynamic.NamespaceableResourceInterface {
	return dyn.Resource(v1alpha1.GroupVersionResource)
}
