package mdserver

import (
	"errors"
	"net"
	"net/http"
	"syscall"
)

// errNoConn is returned when the handler runs without ConnContext.
var errNoConn = errors.New("the connection is not in the request context")

// MaxGuestHops bounds Options.GuestHops: a data path of more routers
// than this between a metadata server and its guests is not one a token
// should cross.
const MaxGuestHops = 8

// TokenTTL is the IP TTL of an IMDSv2 token answer: the instance's
// tokenHopLimit, counted from the guest (1: the guest itself, not a
// container behind a bridge in it), plus the routers between the server
// and the guest (Options.GuestHops), each of which decrements it once.
// A router forwards a packet only while its TTL stays above 0, and the
// guest accepts one arriving with TTL 1: so tokenHopLimit+guestHops lets
// the answer reach the guest's own processes, and no further than
// tokenHopLimit-1 routers inside the guest.
func TokenTTL(tokenHopLimit, guestHops int) int {
	return tokenHopLimit + min(max(guestHops, 0), MaxGuestHops)
}

// setHopLimit sets the IP TTL (IPv4) or unicast hop limit (IPv6) of the
// request's connection, so the IMDSv2 token response cannot travel more
// than hops routers. The setting stays for the rest of the connection:
// resetting it after the response would be unsound, because TCP
// retransmissions of the token use the socket's current value.
func setHopLimit(r *http.Request, hops int) error {
	c, _ := r.Context().Value(connKey).(net.Conn)
	if c == nil {
		return errNoConn
	}
	return SetConnHopLimit(c, hops)
}

// SetConnHopLimit sets the IP TTL and, on IPv6 sockets, the unicast hop
// limit of a TCP connection (or of the one a wrapper such as a Limiter's
// connection or a tls.Conn holds: NetConn).
func SetConnHopLimit(c net.Conn, hops int) error {
	sc, ok := socketOf(c).(syscall.Conn)
	if !ok {
		return errors.New("connection has no socket")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	v6 := false
	if a, ok := c.LocalAddr().(*net.TCPAddr); ok && a.IP.To4() == nil {
		v6 = true
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		serr = setTTL(fd, hops, v6)
	})
	if err != nil {
		return err
	}
	return serr
}

// ConnHopLimit reads back the IPv4 TTL of a connection (for tests and
// diagnostics).
func ConnHopLimit(c net.Conn) (int, error) {
	sc, ok := socketOf(c).(syscall.Conn)
	if !ok {
		return 0, errors.New("connection has no socket")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var v int
	var serr error
	err = raw.Control(func(fd uintptr) { v, serr = getTTL(fd) })
	if err != nil {
		return 0, err
	}
	return v, serr
}

// socketOf unwraps connections that hold another (NetConn) down to the
// socket.
func socketOf(c net.Conn) net.Conn {
	for {
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return c
		}
		c = w.NetConn()
	}
}
