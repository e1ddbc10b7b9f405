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

	"github.com/vminit/vminit/internal/lib/httpserver"
	"github.com/vminit/vminit/mdserver/registry"
)

// The X-Vminit-Instance header names the instance a request a trusted
// proxy forwards comes from, for one incarnation and a short time:
//
//	v2;<name>;<uid>;<unix-expiry>;<hex HMAC-SHA256(key, "v2;<name>;<uid>;<unix-expiry>")>
//
// <uid> is the incarnation (registry.Record.UID, the admin API's "uid"): a
// header minted for an instance is refused for a successor of the same
// name. The expiry may lie at most InstanceHeaderLifetime ahead (plus
// InstanceHeaderSkew for the proxy's clock), so a header leaked from a
// proxy's log or capture names its instance for minutes, not forever; it
// may be replayed until then, as a proxy reusing it for a connection's
// requests does. The first format, "<name>;<unix-expiry>;<HMAC>", bound to
// neither, is refused.
const (
	instanceHeaderVersion = "v2"
	// InstanceHeaderLifetime is how far ahead of the server's clock a
	// header's expiry may be.
	InstanceHeaderLifetime = 5 * time.Minute
	// InstanceHeaderSkew is the difference allowed between the proxy's
	// clock and the server's, on either side: a header is accepted until
	// its expiry plus the skew.
	InstanceHeaderSkew = 30 * time.Second
)

// SignInstance returns the X-Vminit-Instance header value naming
// incarnation uid of instance name until expiry.
func SignInstance(key []byte, name, uid string, expiry time.Time) string {
	msg := strings.Join([]string{instanceHeaderVersion, name, uid, strconv.FormatInt(expiry.Unix(), 10)}, ";")
	return msg + ";" + hex.EncodeToString(mac(key, msg))
}

func mac(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// refusal says why identify found no record: the one line a refused
// request is answered with, so that a guest's operator who curls the
// server from the wrong place reads why. It names nothing but the
// request's own address and the server's settings: never another
// instance, nor whether a name exists.
type refusal uint8

const (
	refusedNone        refusal = iota
	refusedNoOwner             // an address no instance has
	refusedLoopback            // loopback, without --allow-loopback-instances
	refusedUnnamed             // a trusted proxy that named no VM
	refusedName                // a signed name that is not served
	refusedSignature           // a signed header that does not verify
	refusedPredecessor         // a signed header minted for an earlier incarnation
	refusedUnsigned            // X-Forwarded-For where the signed header is required
	refusedForwarded           // an X-Forwarded-For that is not addresses
)

// status is the HTTP status a refusal is answered with.
func (why refusal) status() int {
	switch why {
	case refusedSignature, refusedPredecessor, refusedUnsigned, refusedForwarded:
		return http.StatusForbidden
	}
	return http.StatusNotFound
}

// message is a refusal's one-line answer to a request from addr (the
// address the server identified it by).
func (why refusal) message(addr netip.Addr) string {
	switch why {
	case refusedNoOwner:
		return "vminit: no instance is served to " + addr.String() + ": an instance answers the addresses its spec.metadataServer.addresses lists (in Kubernetes, also its VM's)\n"
	case refusedLoopback:
		return "vminit: " + addr.String() + " is a loopback address, which identifies an instance only when the server runs with --allow-loopback-instances (tries and tests)\n"
	case refusedUnnamed:
		return "vminit: a trusted proxy's own address is no instance's: name the VM with X-Vminit-Instance (or X-Forwarded-For without --hmac-key-file)\n"
	case refusedName:
		return "vminit: the instance X-Vminit-Instance names is not served here\n"
	case refusedSignature:
		return "vminit: X-Vminit-Instance does not verify: signed with another key, outside its time window, or malformed\n"
	case refusedPredecessor:
		return "vminit: X-Vminit-Instance was signed for an earlier incarnation of the instance\n"
	case refusedUnsigned:
		return "vminit: with --hmac-key-file, a trusted proxy names its VM only by the signed X-Vminit-Instance header\n"
	case refusedForwarded:
		return "vminit: X-Forwarded-For holds something that is not an address\n"
	}
	return ""
}

// identify finds the record a request speaks for, or says why not (see
// refusal): 404 for an address (or name) nobody owns, 403 for a signed
// header that does not verify, is out of its time window or names
// another incarnation, or for an unsigned X-Forwarded-For when signed
// headers are required. addr is the address the request was identified
// by (its source, or the one a trusted proxy forwarded).
//
// Only a request whose source address is in Options.TrustedProxies may
// name another address or an instance; from anywhere else X-Forwarded-For
// and X-Vminit-Instance are ignored and the source address decides. A
// trusted proxy that names no instance is answered 404: its own address
// is nobody's. A loopback address identifies nobody unless
// Options.AllowLoopbackInstances.
func (h *Handler) identify(r *http.Request) (rec *registry.Record, addr netip.Addr, why refusal) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return nil, addr, refusedNoOwner
	}
	src := ap.Addr().Unmap()
	snap := h.snapshot()
	if !h.trusted(src) {
		rec, why := h.byAddr(snap, src)
		return rec, src, why
	}
	if v := r.Header.Get(HeaderInstance); v != "" {
		name, uid, ok := h.verifyInstance(v)
		if !ok {
			return nil, src, refusedSignature
		}
		rec, found := snap.ByName(name)
		if !found {
			return nil, src, refusedName
		}
		if rec.UID != uid {
			return nil, src, refusedPredecessor // minted for a predecessor
		}
		return rec, src, refusedNone
	}
	xff := r.Header.Values("X-Forwarded-For")
	if len(xff) > 0 && len(h.opts.HMACKey) > 0 {
		// With a key, the signed header is the only way: an unsigned
		// header would let whatever reaches the proxy choose whose data
		// it gets.
		return nil, src, refusedUnsigned
	}
	if len(xff) > 0 {
		// The rightmost address that is not itself a trusted proxy is the
		// one the nearest trusted proxy saw.
		all := strings.Split(strings.Join(xff, ","), ",")
		for i := len(all) - 1; i >= 0; i-- {
			a, err := netip.ParseAddr(strings.TrimSpace(all[i]))
			if err != nil {
				return nil, src, refusedForwarded
			}
			a = a.Unmap()
			if i > 0 && h.trusted(a) {
				continue
			}
			rec, why := h.byAddr(snap, a)
			return rec, a, why
		}
	}
	return nil, src, refusedUnnamed
}

// byAddr is the record an address identifies.
func (h *Handler) byAddr(snap *registry.Snapshot, a netip.Addr) (*registry.Record, refusal) {
	if a.IsLoopback() && !h.opts.AllowLoopbackInstances {
		return nil, refusedLoopback
	}
	rec, ok := snap.ByAddr(a)
	if !ok {
		return nil, refusedNoOwner
	}
	return rec, refusedNone
}

// Knows reports whether a source address is an instance's or a trusted
// proxy's (Limits.Known).
func (h *Handler) Knows(a netip.Addr) bool {
	a = a.Unmap()
	if h.trusted(a) {
		return true
	}
	_, why := h.byAddr(h.src.Snapshot(), a)
	return why == refusedNone
}

// fromTrustedProxy reports whether the request's source is a trusted
// proxy (which then named the instance by a header).
func (h *Handler) fromTrustedProxy(r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && h.trusted(ap.Addr().Unmap())
}

func (h *Handler) trusted(a netip.Addr) bool {
	for _, p := range h.opts.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// verifyInstance checks a signed instance header (see SignInstance) and
// returns the name and incarnation it names.
func (h *Handler) verifyInstance(v string) (name, uid string, ok bool) {
	if len(h.opts.HMACKey) == 0 || len(v) > 512 {
		return "", "", false
	}
	f := strings.Split(v, ";")
	if len(f) != 5 || f[0] != instanceHeaderVersion || f[1] == "" {
		return "", "", false
	}
	secs, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return "", "", false
	}
	got, err := hex.DecodeString(f[4])
	msg := v[:len(v)-len(f[4])-1]
	if err != nil || !hmac.Equal(got, mac(h.opts.HMACKey, msg)) {
		return "", "", false
	}
	now, exp := h.opts.Now(), time.Unix(secs, 0)
	if !now.Before(exp.Add(InstanceHeaderSkew)) || exp.After(now.Add(InstanceHeaderLifetime+InstanceHeaderSkew)) {
		return "", "", false
	}
	return f[1], f[2], true
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
// timeouts and limits a server facing many guests needs (a request read
// in 10 s, its answer written in 30 s, and internal/lib/httpserver's
// limits), and ConnContext set for the IMDSv2 hop limit.
func NewServer(h http.Handler) *http.Server {
	srv := httpserver.New(h, 10*time.Second, 30*time.Second)
	srv.ConnContext = ConnContext
	return srv
}
