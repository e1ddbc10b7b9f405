package admin

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// FuzzAdminRequest sends the admin API arbitrary requests (method, path,
// query, Authorization header, body) and holds it to its contract: no
// panic; without the token a 401 whatever else the request says; every
// error JSON, never a redirect or a 500.
func FuzzAdminRequest(f *testing.F) {
	for _, s := range []struct{ method, path, query, auth, body string }{
		{"GET", "/v1/instances", "", "Bearer " + adminToken, ""},
		{"PUT", "/v1/instances/web", "", "Bearer " + adminToken, webSpec},
		{"PUT", "/v1/instances/web", "", "Bearer wrong", webSpec},
		{"GET", "/v1/instances/web/preview", "dialect=ignition&variant=../../etc", "Bearer " + adminToken, ""},
		{"GET", "/v1/instances/web/preview", "dialect=ec2", "Bearer " + adminToken, ""},
		{"PATCH", "/v1//instances/./web", "", "Bearer " + adminToken, ""},
		{"DELETE", "/v1/instances/web", "", "bearer " + adminToken, ""},
		{"GET", "/", "", "", ""},
	} {
		f.Add(s.method, s.path, s.query, s.auth, s.body)
	}
	store := newMemStore()
	h := NewHandler(store, Options{Token: adminToken, MaxBodyBytes: 8192, Logger: slog.New(slog.DiscardHandler)})
	if _, err := store.Put(context.Background(), []byte(webSpec)); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, method, path, query, auth, body string) {
		if method == "" || len(path) > 4096 {
			return
		}
		r := (&http.Request{Method: method, URL: &url.URL{Path: path, RawQuery: query}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{}, Host: "admin", RemoteAddr: "127.0.0.1:40000", Body: http.NoBody}).WithContext(context.Background())
		if body != "" {
			r.Body = httpBody(body)
			r.ContentLength = int64(len(body))
		}
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		authorized := strings.TrimSpace(strings.TrimPrefix(auth, "Bearer ")) == adminToken && strings.HasPrefix(auth, "Bearer ")
		switch {
		case !authorized && w.Code != 401:
			t.Fatalf("%s %q without the token: %d", method, path, w.Code)
		case w.Code >= 300 && w.Code < 400, w.Code == 500:
			t.Fatalf("%s %q?%s: %d %q", method, path, query, w.Code, w.Body.String())
		case w.Code >= 400 && w.Header().Get("Content-Type") != "application/json":
			t.Fatalf("%s %q: a %d of type %q", method, path, w.Code, w.Header().Get("Content-Type"))
		}
	})
}

func httpBody(s string) *bodyReader { return &bodyReader{strings.NewReader(s)} }

type bodyReader struct{ *strings.Reader }

func (bodyReader) Close() error { return nil }
