package mdserver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

const testKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGClPAdKZWvfQndmz2tRFw+JMNfVSzOuyotc5XUqX77L ops@example.com"

// instanceDoc is a small but complete spec served by the tests.
func instanceDoc(name string, addrs []string, extra string) string {
	return fmt.Sprintf(`apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata:
  name: %s
spec:
  fqdn: %s.example.com
  sshAuthorizedKeys:
    - %s
  users:
    - name: alice
      sudo: "ALL=(ALL) NOPASSWD:ALL"
  network:
    ethernets:
      eth0:
        match:
          macAddress: "52:54:00:12:34:%02x"
        addresses: [192.0.2.%d/24]
        gateway4: 192.0.2.1
  metadataServer:
    addresses: [%s]
%s`, name, name, testKey, len(name), len(name)+10, strings.Join(addrs, ", "), extra)
}

// testRecord decodes a spec document into a Record (what the stores do).
func testRecord(t testing.TB, doc, rev string) *registry.Record {
	t.Helper()
	inst, _, err := spec.Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := inst.Resolve(""); err != nil {
		t.Fatal(err)
	}
	inst.Default()
	if err := inst.Validate(); err != nil {
		t.Fatal(err)
	}
	r, err := registry.NewRecord(inst, rev)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func testStore(t testing.TB, recs ...*registry.Record) *registry.StaticStore {
	t.Helper()
	s, err := registry.NewStaticStore(recs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// connLog records the server side of every accepted connection.
type connLog struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *connLog) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

// serve runs h on 127.0.0.1:0 the way NewServer configures it.
func serve(t testing.TB, h http.Handler) (*httptest.Server, *connLog) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &connLog{Listener: ln}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = cl
	srv.Config.ConnContext = ConnContext
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, cl
}

// clientFrom returns an HTTP client whose connections come from src
// (Linux routes all of 127.0.0.0/8 to lo).
func clientFrom(src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

type resp struct {
	status int
	body   string
	header http.Header
}

func do(t testing.TB, c *http.Client, method, url string, hdr map[string]string, body string) resp {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, string(b), res.Header}
}

func get(t testing.TB, c *http.Client, url string) resp { return do(t, c, "GET", url, nil, "") }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newPlainServer serves h without ConnContext.
func newPlainServer(t testing.TB, h http.Handler) string {
	srv := httptest.NewUnstartedServer(h)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}
