package run

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

// The guest reaches its metadata server only through its own relay: QEMU
// forwards the guest's connections to 169.254.169.254:80 (guestfwd) to a
// socket chardev, which connects to a Unix socket in the run's private
// directory, served here in-process. No process is started per
// connection, nothing listens on the host's TCP loopback, and no other
// process (another run's guest, a local user) can reach this guest's data:
// the socket is in a 0700 directory and QEMU holds the one connection.
//
// QEMU carries every guest connection over that one stream, in order, and
// never says where one ends (libslirp's guestfwd to a chardev); its answers
// go to the guest's newest connection. So the relay reads HTTP requests one
// after the other from the stream and answers each with a Content-Length
// (never by closing: the stream is the guest's only way in). Metadata
// clients (cloud-init, Ignition, curl) ask one request at a time. A request
// that does not parse, or stalls, is answered 400 and what was buffered is
// dropped, so the next connection starts afresh.

// relayMaxRequest bounds one request's header and body: what one guest
// can make the relay hold. The largest body the handler takes is the
// guest's first-boot report; relayMaxHeader is room for its header.
const (
	relayMaxHeader  = 16 << 10
	relayMaxRequest = firstboot.MaxReportBytes + relayMaxHeader
)

// relayRequestTimeout bounds the time from a request's first byte to its
// end, and the time to write its answer (a variable for the tests).
var relayRequestTimeout = 10 * time.Second

// relayGuestAddr is the address the metadata server knows the guest by:
// the first address QEMU's DHCP gives on metadataNet. Requests through the
// relay are this guest's, whatever address it has set itself.
var relayGuestAddr = netip.MustParseAddr("169.254.169.15")

// relay serves one guest's metadata requests on a Unix socket.
type relay struct {
	l    net.Listener
	h    *mdserver.Handler
	name string // the instance served
	wg   sync.WaitGroup
	mu   sync.Mutex
	conn net.Conn // the stream being served
}

// startRelay serves inst's metadata on a Unix socket at path. The
// handler's first-boot tracker is boots (nil: one with the default
// options): the guest's fetches and the events and report its agent posts
// through the relay land there (firstboot.go).
func startRelay(inst *spec.Instance, path string, boots *firstboot.Tracker) (*relay, error) {
	rec, err := registry.NewRecord(inst, "run")
	if err != nil {
		return nil, err
	}
	rec.Addresses = []netip.Addr{relayGuestAddr}
	store, err := registry.NewStaticStore([]*registry.Record{rec})
	if err != nil {
		return nil, err
	}
	h := mdserver.NewHandler(store, mdserver.Options{
		// The guest's packets reach the relay through QEMU's user
		// network, which sets its own TTL: there is no hop to limit.
		NoHopLimit: true,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Boots:      boots,
		// The guest posts its first-boot events and report where it
		// reads its data: the relay's address, the one it reaches.
		ReportURL: "http://" + metadataAddr,
	})
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	r := &relay{l: l, h: h, name: rec.Name}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// accept serves one stream at a time: QEMU's (it reconnects when one ends).
func (r *relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.l.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		r.conn = c
		r.mu.Unlock()
		r.serveStream(c)
		c.Close()
	}
}

// Close stops the relay and waits for it.
func (r *relay) Close() error {
	err := r.l.Close()
	r.mu.Lock()
	if r.conn != nil {
		r.conn.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return err
}

// serveStream answers the requests on one stream until it ends or an
// answer cannot be written.
func (r *relay) serveStream(c net.Conn) {
	budget := &io.LimitedReader{R: c}
	br := bufio.NewReaderSize(budget, 4096)
	for {
		c.SetReadDeadline(time.Time{}) // a silent guest holds only this stream
		budget.N = relayMaxRequest
		if _, err := br.Peek(1); err != nil {
			return // QEMU closed the stream, or Close did
		}
		c.SetReadDeadline(time.Now().Add(relayRequestTimeout))
		resp := r.answer(br)
		c.SetWriteDeadline(time.Now().Add(relayRequestTimeout))
		if err := resp.Write(c); err != nil {
			return
		}
	}
}

// answer reads one request and returns the metadata server's answer; a
// request that does not parse or stalls gets 400, and the rest of what
// was buffered is dropped.
func (r *relay) answer(br *bufio.Reader) *http.Response {
	req, err := http.ReadRequest(br)
	var body []byte
	if err == nil {
		// The whole body, here and now: the stream holds the next
		// request after it. It is within relayMaxRequest; the handler
		// reads one only for a POST (OpenStack's password, and the
		// first-boot events and report of firstboot.go).
		body, err = io.ReadAll(req.Body)
	}
	if err != nil {
		br.Discard(br.Buffered())
		return respond(nil, http.StatusBadRequest, nil, nil)
	}
	req.RemoteAddr = netip.AddrPortFrom(relayGuestAddr, 0).String()
	req.Body = io.NopCloser(bytes.NewReader(body))
	w := &bufferedResponse{header: http.Header{}}
	r.h.ServeHTTP(w, req)
	return respond(req, w.status(), w.header, w.body.Bytes())
}

// respond builds an answer delimited by its Content-Length: the stream
// stays open for the guest's next connection.
func respond(req *http.Request, code int, h http.Header, body []byte) *http.Response {
	if h == nil {
		h = http.Header{}
	}
	h.Del("Connection")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	return &http.Response{
		StatusCode: code, ProtoMajor: 1, ProtoMinor: 1, Request: req,
		Header: h, ContentLength: int64(len(body)), Body: io.NopCloser(bytes.NewReader(body)),
	}
}

// bufferedResponse is an http.ResponseWriter that keeps the answer.
type bufferedResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(code int) {
	if b.code == 0 {
		b.code = code
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}

func (b *bufferedResponse) status() int {
	if b.code == 0 {
		return http.StatusOK
	}
	return b.code
}

// relaySocket is the relay's socket in the run's directory.
func relaySocket(dir string) string { return filepath.Join(dir, "metadata.sock") }
