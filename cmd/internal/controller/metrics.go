package controller

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// Metrics are the controller's counters, in the Prometheus text format:
//
//	vminit_controller_leader                      1 while this replica leads
//	vminit_controller_reconciles_total{kind,result}
//	vminit_controller_reconcile_seconds_total{kind}
//	vminit_controller_queue_depth
//	vminit_controller_writes_total{object}        status, secret, virtualmachine, labels
//	vminit_controller_writes_skipped_total        reconciles that found nothing to change
type Metrics struct {
	leader atomic.Int64
	depth  atomic.Int64
	// [kind][0 ok, 1 error]
	reconciles [2][2]atomic.Uint64
	nanos      [2]atomic.Uint64

	statusWrites, secretWrites, vmWrites, labelWrites, skipped atomic.Uint64
}

func newMetrics() *Metrics { return &Metrics{} }

func (m *Metrics) reconciled(kind byte, err error, d time.Duration) {
	k, r := 0, 0
	if kind == kindVM {
		k = 1
	}
	if err != nil {
		r = 1
	}
	m.reconciles[k][r].Add(1)
	m.nanos[k].Add(uint64(d))
}

// ServeHTTP serves the metrics.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	m.write(w)
}

// write writes the metrics in the Prometheus text format.
func (m *Metrics) write(w io.Writer) {
	kinds := [2]string{"Instance", "VirtualMachine"}
	fmt.Fprintf(w, "# HELP vminit_controller_leader 1 while this replica holds the lease and reconciles.\n# TYPE vminit_controller_leader gauge\nvminit_controller_leader %d\n", m.leader.Load())
	fmt.Fprintf(w, "# HELP vminit_controller_reconciles_total Reconciles done, by kind and result.\n# TYPE vminit_controller_reconciles_total counter\n")
	for k, name := range kinds {
		for r, res := range [2]string{"ok", "error"} {
			fmt.Fprintf(w, "vminit_controller_reconciles_total{kind=%q,result=%q} %d\n", name, res, m.reconciles[k][r].Load())
		}
	}
	fmt.Fprintf(w, "# HELP vminit_controller_reconcile_seconds_total Time spent reconciling, by kind.\n# TYPE vminit_controller_reconcile_seconds_total counter\n")
	for k, name := range kinds {
		fmt.Fprintf(w, "vminit_controller_reconcile_seconds_total{kind=%q} %g\n", name, float64(m.nanos[k].Load())/1e9)
	}
	fmt.Fprintf(w, "# HELP vminit_controller_queue_depth Objects waiting to be reconciled.\n# TYPE vminit_controller_queue_depth gauge\nvminit_controller_queue_depth %d\n", m.depth.Load())
	fmt.Fprintf(w, "# HELP vminit_controller_writes_total Objects written, by what was written.\n# TYPE vminit_controller_writes_total counter\n")
	fmt.Fprintf(w, "vminit_controller_writes_total{object=\"status\"} %d\nvminit_controller_writes_total{object=\"secret\"} %d\nvminit_controller_writes_total{object=\"virtualmachine\"} %d\nvminit_controller_writes_total{object=\"labels\"} %d\n",
		m.statusWrites.Load(), m.secretWrites.Load(), m.vmWrites.Load(), m.labelWrites.Load())
	fmt.Fprintf(w, "# HELP vminit_controller_writes_skipped_total Reconciles that found the object as it should be and wrote nothing.\n# TYPE vminit_controller_writes_skipped_total counter\nvminit_controller_writes_skipped_total %d\n", m.skipped.Load())
}
