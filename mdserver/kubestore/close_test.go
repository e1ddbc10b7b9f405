package kubestore_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/mdserver/kubestore"
)

// TestCloseDuringWatchIsQuiet: closing a store while its watch request is
// still on its way (a distant API server, or one without the watch-list
// feature, so that the watch follows the list) logs nothing through
// client-go: "Failed to watch ... context canceled" at the end of every
// one-shot command (vminit instances list --kubeconfig) told users of an
// error that was not one. The API server here lists an empty namespace,
// refuses watch-list requests and holds plain watches unanswered.
func TestCloseDuringWatchIsQuiet(t *testing.T) {
	watching := make(chan struct{}, 8)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		q := r.URL.Query()
		switch {
		case q.Get("sendInitialEvents") == "true":
			w.WriteHeader(http.StatusUnprocessableEntity)
			w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Invalid","code":422,"message":"sendInitialEvents is not supported"}`))
		case q.Get("watch") == "true":
			watching <- struct{}{}
			<-r.Context().Done()
		default:
			w.Write([]byte(`{"apiVersion":"vminit.dev/v1alpha1","kind":"InstanceList","metadata":{"resourceVersion":"7"},"items":[]}`))
		}
	}))
	defer api.Close()

	logged := &testtools.SyncBuffer{}
	klog.SetSlogLogger(slog.New(slog.NewTextHandler(logged, nil)))
	defer klog.ClearLogger()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := kubestore.Open(ctx, kubestore.Config{REST: &rest.Config{Host: api.URL}, Namespaces: []string{"default"},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-watching:
	case <-ctx.Done():
		t.Fatal("the store never watched")
	}
	s.Close()
	if out := logged.String(); strings.Contains(out, "Failed to watch") || strings.Contains(out, "level=ERROR") {
		t.Errorf("closing the store logged through client-go:\n%s", out)
	}
}
