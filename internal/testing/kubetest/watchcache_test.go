package kubetest_test

import (
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/vminit/vminit/internal/testing/kubetest"
)

// TestWatchCache runs the API server as a cluster does, its watch cache
// on, on the etcd scripts/install-etcd.sh builds (or $VMINIT_TEST_ETCD):
// the cache is on, and a consistent read of a resource nobody writes
// (served from the cache once etcd's progress notification says it is
// current, what Debian's etcd 3.4.23 cannot) answers, as does a watch.
func TestWatchCache(t *testing.T) {
	etcd := os.Getenv("VMINIT_TEST_ETCD")
	if etcd == "" {
		etcd = kubetest.InstalledEtcd()
	}
	if etcd == "" {
		// A benchmark tool, which CI does not install: skipped even
		// where missing test tools fail the run.
		t.Skip("no etcd for the watch cache (scripts/install-etcd.sh builds one)")
	}
	s := kubetest.StartOptions(t, kubetest.Options{Etcd: etcd, WatchCache: true})
	if d := s.Describe(); !strings.Contains(d, "watch cache on; etcd 3.") {
		t.Errorf("Describe: %s", d)
	}
	ctx := ctxFor(t)
	cs := s.Clientset(t)
	metrics, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The cache's gauge, which an API server without it does not export.
	if !strings.Contains(string(metrics), "\nwatch_cache_capacity{group=\"\",resource=\"configmaps\"}") {
		t.Errorf("/metrics has no watch_cache_capacity for configmaps: the watch cache is off")
	}
	// Nobody writes LimitRanges: a consistent list waits for etcd's
	// progress notification (3 s and "Too large resource version" on an
	// etcd without the fix).
	start := time.Now()
	if _, err := cs.CoreV1().LimitRanges("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("a consistent list of a quiet resource: %v", time.Since(start))
	w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{LabelSelector: "k=v"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, l := range []string{"other", "v"} {
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "c-" + l, Labels: map[string]string{"k": l}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case ev := <-w.ResultChan():
		if cm, ok := ev.Object.(*corev1.ConfigMap); ev.Type != watch.Added || !ok || cm.Name != "c-v" {
			t.Fatalf("the selected watch saw %s %#v, want ADDED c-v", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("the selected watch saw nothing")
	}
}
