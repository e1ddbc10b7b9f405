package etcdstore

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vminit/vminit/internal/bench/mdbench"
	"github.com/vminit/vminit/internal/testing/etcdtest"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// BenchmarkOpen100k measures Open on a prefix of 100,000 instances
// (mdbench.SpecFile, the directory store's benchmark documents) in a real
// etcd: the first list and every decode, what a replica does before it
// serves. Run with -benchtime 1x; writing the keys takes a minute and is
// outside the timer.
func BenchmarkOpen100k(b *testing.B) {
	const n = 100_000
	e := etcdtest.Start(b, nil)
	put(b, e.Client(), n)
	b.ResetTimer()
	for b.Loop() {
		s, err := Open(context.Background(), Config{Endpoints: []string{e.ClientURL}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		if got := s.Snapshot().Len(); got != n {
			b.Fatalf("loaded %d of %d", got, n)
		}
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
}

// put writes n documents under DefaultPrefix, 100 per transaction (etcd's
// default --max-txn-ops is 128).
func put(tb testing.TB, cli *clientv3.Client, n int) {
	tb.Helper()
	ctx := context.Background()
	for i := 0; i < n; i += 100 {
		var ops []clientv3.Op
		for j := i; j < min(i+100, n); j++ {
			ops = append(ops, clientv3.OpPut(DefaultPrefix+fmt.Sprintf("vm-%06d", j), string(mdbench.SpecFile(j, mdbench.Addr(j)))))
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkBootValue measures what one write of a first-boot status puts
// in etcd: a status with a full log (64 events of cloud-init's shape),
// as JSON and as stored (gzipped JSON), and the time to make it.
func BenchmarkBootValue(b *testing.B) {
	tr := firstboot.New(firstboot.Options{})
	tr.Fetch("vm", "c1", "cloud-init", "nocloud", "/meta-data")
	for j := range firstboot.MaxEvents - 1 {
		tr.Record("vm", "c1", "cloud-init", firstboot.Event{Kind: firstboot.KindStart,
			Name: fmt.Sprintf("modules-config/config-module-%d", j), Message: "running config-module with frequency once-per-instance"})
	}
	st := tr.Status("vm", "c1", "")
	plain, _ := json.Marshal(&st)
	var stored []byte
	for b.Loop() {
		stored, _ = bootValue(&st)
	}
	b.ReportMetric(float64(len(plain)), "json-B")
	b.ReportMetric(float64(len(stored)), "stored-B")
}
