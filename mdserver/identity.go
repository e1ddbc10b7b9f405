package mdserver

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/vminit/vminit/mdserver/registry"
)

// SignInstance returns the X-Vminit-Instance header value a trusted proxy
// sends to name the instance a request comes from:
// "<name>;<unix-expiry>;<hex HMAC-SHA256(key, "<name>;<unix-expiry>")>".
func SignInstance(key []byte, name string, expiry time.Time) string {
	msg := name + ";" + strconv.FormatInt(expiry.Unix(), 10)
	return msg + ";" + hex.EncodeToString(mac(key, msg))
}

func mac(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// identify finds the record a request speaks for, or returns the status to
// refuse it with: 404 for an address (or name) nobody owns, 403 for a
// signed header that does not verify or has expired.
//
// Only a request whose source address is in Options.TrustedProxies may
// name another address or an instance; from anywhere else X-Forwarded-For
// and X-Vminit-Instance are ignored and the source address decides.
func (h *Handler) identify(r *http.Request) (*registry.Record, int) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return nil, http.StatusNotFound
	}
	src := ap.Addr().Unmap()
	snap := h.snapshot()
	if !h.trusted(src) {
		rec, ok := snap.ByAddr(src)
		if !ok {
			return nil, http.StatusNotFound
		}
		return rec, 0
	}
	if v := r.Header.Get(HeaderInstance); v != "" {
		name, ok := h.verifyInstance(v)
		if !ok {
			return nil, http.StatusForbidden
		}
		rec, found := snap.ByName(name)
		if !found {
			return nil, http.StatusNotFound
		}
		return rec, 0
	}
	if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
		// The rightmost address that is not itself a trusted proxy is the
		// one the nearest trusted proxy saw.
		all := strings.Split(strings.Join(xff, ","), ",")
		for i := len(all) - 1; i >= 0; i-- {
			a, err := netip.ParseAddr(strings.TrimSpace(all[i]))
			if err != nil {
				return nil, http.StatusForbidden
			}
			a = a.Unmap()
			if i > 0 && h.trusted(a) {
				continue
			}
			rec, ok := snap.ByAddr(a)
			if !ok {
				return nil, http.StatusNotFound
			}
			return rec, 0
		}
	}
	rec, ok := snap.ByAddr(src)
	if !ok {
		return nil, http.StatusNotFound
	}
	return rec, 0
}

func (h *Handler) trusted(a netip.Addr) bool {
	for _, p := range h.opts.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// verifyInstance checks a signed instance header and returns the name.
func (h *Handler) verifyInstance(v string) (string, bool) {
	if len(h.opts.HMACKey) == 0 || len(v) > 512 {
		return "", false
	}
	i := strings.LastIndexByte(v, ';')
	if i < 0 {
		return "", false
	}
	msg, sig := v[:i], v[i+1:]
	j := strings.LastIndexByte(msg, ';')
	if j < 0 {
		return "", false
	}
	name, exp := msg[:j], msg[j+1:]
	secs, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || name == "" {
		return "", false
	}
	got, err := hex.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac(h.opts.HMACKey, msg)) {
		return "", false
	}
	if !h.opts.Now().Before(time.Unix(secs, 0)) {
		return "", false
	}
	return name, true
}

// snapshot returns the store's current snapshot and, when it changed since
// the last request, drops cached payloads of records that are gone or
// changed (in the background: requests never wait for it).
func (h *Handler) snapshot() *registry.Snapshot {
	s := h.src.Snapshot()
	if old := h.lastSnap.Load(); old != s && h.lastSnap.CompareAndSwap(old, s) && old != nil {
		go h.sweep(s)
	}
	return s
}

// ConnContext stores the connection in the request context so that the
// IMDSv2 token response can set the hop limit (IP TTL) on it. Set it as
// http.Server.ConnContext; NewServer does.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey, c)
}

// NewServer returns an http.Server for the metadata handler with the
// timeouts and limits a server facing many guests needs, and ConnContext
// set for the IMDSv2 hop limit.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ConnContext:       ConnContext,
	}
}
