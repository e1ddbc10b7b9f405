package kubetest

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/rest"
)

// WatchCounter counts the watches a client has open (requests with
// watch=true whose answer's body is not closed yet), and the most it ever
// had. Count wraps a client configuration's transport with it.
type WatchCounter struct {
	next      http.RoundTripper
	open, max atomic.Int64
}

// Count makes cfg's client count its watches in a new WatchCounter.
func Count(cfg *rest.Config) *WatchCounter {
	w := &WatchCounter{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { w.next = rt; return w })
	return w
}

// Open is how many watches are open.
func (w *WatchCounter) Open() int64 { return w.open.Load() }

// Max is the most watches that were open at once.
func (w *WatchCounter) Max() int64 { return w.max.Load() }

func (w *WatchCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := w.next.RoundTrip(r)
	if err != nil || r.URL.Query().Get("watch") != "true" {
		return resp, err
	}
	n := w.open.Add(1)
	for m := w.max.Load(); n > m && !w.max.CompareAndSwap(m, n); m = w.max.Load() {
	}
	resp.Body = &countedBody{ReadCloser: resp.Body, w: w}
	return resp, nil
}

type countedBody struct {
	io.ReadCloser
	w    *WatchCounter
	once sync.Once
}

func (b *countedBody) Close() error {
	b.once.Do(func() { b.w.open.Add(-1) })
	return b.ReadCloser.Close()
}
