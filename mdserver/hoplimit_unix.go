//go:build unix

package mdserver

import "syscall"

func setTTL(fd uintptr, hops int, v6 bool) error {
	if v6 {
		// A dual-stack socket may carry IPv4-mapped traffic too: set both
		// (IP_TTL may fail on a v6-only socket; the IPv6 value is what
		// matters there).
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_TTL, hops)
		return syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IPV6, syscall.IPV6_UNICAST_HOPS, hops)
	}
	return syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_TTL, hops)
}

func getTTL(fd uintptr) (int, error) {
	return syscall.GetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_TTL)
}
