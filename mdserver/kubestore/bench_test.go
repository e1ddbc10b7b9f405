package kubestore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vminit/vminit/deploy/kubernetes/crd"
	"github.com/vminit/vminit/internal/bench/kubebench"
	"github.com/vminit/vminit/internal/testing/kubetest"
	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/mdserver/kubestore"
)

// BenchmarkServeKubernetes measures, against a real API server holding
// kubebench.Count() Instances (10,000): the start-up of the Kubernetes
// store `vminit serve --kubernetes` opens (list, decode, index), and the
// delay from an Instance's update (the API call starting; -watch: the
// call returning) to the new version being served, over 1,000 updates:
//
//	go test -run '^$' -bench ServeKubernetes -benchtime 1x ./mdserver/kubestore
func BenchmarkServeKubernetes(b *testing.B) {
	s := kubetest.Start(b)
	s.CreateCRDs(b, crd.Instances)
	n := kubebench.Count()
	res := kubebench.Resource(s.Dynamic(b))
	created := kubebench.Create(b, res, "default", n, 16)
	b.ReportMetric(created.Seconds(), "s-create")
	ctx := context.Background()
	for range b.N {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		st, err := kubestore.Open(ctx, kubestore.Config{REST: s.Config(), Namespaces: []string{"default"}, Logger: slog.New(slog.DiscardHandler), Addresses: kubetest.Tenants})
		if err != nil {
			b.Fatal(err)
		}
		open := time.Since(start)
		if st.Snapshot().Len() != n {
			b.Fatalf("%d instances served, want %d", st.Snapshot().Len(), n)
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(open.Seconds(), "s-startup")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB-heap")

		// Update-to-served: each update renames one instance's host; the
		// delay ends when the store's snapshot serves it.
		const updates = 1000
		delays := make([]time.Duration, 0, updates)
		watched := make([]time.Duration, 0, updates) // from the API call's return
		for i := range updates {
			name := fmt.Sprintf("vm-%05d", i*n/updates)
			u, err := res.Namespace("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				b.Fatal(err)
			}
			host := fmt.Sprintf("h%d", i)
			unstructured.SetNestedField(u.Object, host, "spec", "hostname")
			addr := netip.MustParseAddr(kubebench.Address(i * n / updates))
			start := time.Now()
			if _, err := res.Namespace("default").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
				b.Fatal(err)
			}
			written := time.Now()
			for {
				if r, ok := st.Snapshot().ByAddr(addr); ok && r.Instance().Spec.Hostname == host {
					break
				}
				if time.Since(start) > 30*time.Second {
					b.Fatalf("update %d never served", i)
				}
				time.Sleep(50 * time.Microsecond)
			}
			delays = append(delays, time.Since(start))
			watched = append(watched, time.Since(written))
		}
		slices.Sort(delays)
		slices.Sort(watched)
		b.ReportMetric(float64(delays[len(delays)/2].Microseconds())/1000, "ms-p50")
		b.ReportMetric(float64(delays[len(delays)*99/100].Microseconds())/1000, "ms-p99")
		b.ReportMetric(float64(watched[len(watched)/2].Microseconds())/1000, "ms-watch-p50")
		b.ReportMetric(float64(watched[len(watched)*99/100].Microseconds())/1000, "ms-watch-p99")
		st.Close()
	}
	cur, _ := kubebench.RSS(b, s.PID())
	b.ReportMetric(cur, "MiB-apiserver")
}

// BenchmarkFirstBootOfHostile measures what status.firstBoot takes of a
// hostile guest's record (16 failures of 2 KiB with 256-byte names, the
// tracker's caps): the bytes of its JSON in every Instance, which every
// watcher receives and every informer caches:
//
//	go test -run '^$' -bench FirstBootOfHostile ./mdserver/kubestore
func BenchmarkFirstBootOfHostile(b *testing.B) {
	name := strings.Repeat("n", firstboot.MaxName)
	st := firstboot.Status{Name: "default/bad", State: firstboot.Failed, Agent: "cloud-init", Stage: name, Module: name,
		FirstFetch: time.Unix(1e9, 0), LastEvent: time.Unix(1e9+60, 0), Finished: time.Unix(1e9+60, 0)}
	for range firstboot.MaxFailures {
		st.Errors = append(st.Errors, firstboot.Failure{Stage: name, Module: name, Unit: name, Message: strings.Repeat("m", firstboot.MaxMessage)})
	}
	var size int
	for range b.N {
		raw, err := json.Marshal(kubestore.FirstBootOf(&st))
		if err != nil {
			b.Fatal(err)
		}
		size = len(raw)
	}
	b.ReportMetric(float64(size), "status-bytes")
}
