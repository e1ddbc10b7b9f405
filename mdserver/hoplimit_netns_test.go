//go:build linux

package mdserver

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vminit/vminit/internal/testing/testtools"
)

// netns is a network namespace held open by a sleeping process.
type netns struct {
	path string
	cmd  *exec.Cmd
}

func newNetns(t *testing.T, unshare string) *netns {
	t.Helper()
	cmd := exec.Command(unshare, "-n", "--", "sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	n := &netns{path: fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid), cmd: cmd}
	// unshare has made the namespace once the path differs from ours.
	self, _ := os.Readlink("/proc/self/ns/net")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if l, err := os.Readlink(n.path); err == nil && l != self {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("unshare made no network namespace")
		}
	}
	return n
}

func (n *netns) pid() string { return strconv.Itoa(n.cmd.Process.Pid) }

// ip runs ip(8) in the namespace.
func (n *netns) ip(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("nsenter", append([]string{"--net=" + n.path, "ip"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
	}
}

func (n *netns) sysctl(t *testing.T, key, value string) {
	t.Helper()
	out, err := exec.Command("nsenter", "--net="+n.path, "sysctl", "-qw", key+"="+value).CombinedOutput()
	if err != nil {
		t.Fatalf("sysctl %s: %v %s", key, err, out)
	}
}

// in runs f on a thread moved into the namespace: the sockets f makes
// belong to it for good, wherever they are used afterwards. The thread
// is never handed back to the runtime (it ends with the goroutine).
func (n *netns) in(t *testing.T, f func()) {
	t.Helper()
	done := make(chan error)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open(n.path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
		}
		if err == nil {
			f()
		}
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// inHdrErrors is the namespace's count of IPv4 packets dropped for a bad
// header, an expired TTL among them (/proc/net/snmp's Ip InHdrErrors).
func (n *netns) inHdrErrors(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%s/net/snmp", n.pid()))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for i := 0; i+1 < len(lines); i++ {
		if strings.HasPrefix(lines[i], "Ip: ") && strings.HasPrefix(lines[i+1], "Ip: ") {
			keys, vals := strings.Fields(lines[i]), strings.Fields(lines[i+1])
			for j, k := range keys {
				if k == "InHdrErrors" {
					v, _ := strconv.Atoi(vals[j])
					return v
				}
			}
		}
	}
	t.Fatal("no Ip InHdrErrors in /proc/net/snmp")
	return 0
}

// TestTokenHopLimitBehindMasquerade: a node agent (GuestHops 1) answers an
// IMDSv2 token PUT to the guest of a virt-launcher pod, and its answer
// dies at the guest's own bridge before a container nested inside the
// guest gets it; with the instance's tokenHopLimit at 2 (as on EC2 for
// containers) the nested one gets it too.
//
// Namespaces stand for the node (where the agent listens), the pod
// (routing between its eth0 and the guest's link, as virt-launcher's
// masquerade does), the guest, and a container in the guest behind a
// bridge. The pod's NAT is not simulated (it changes addresses, not
// TTLs): the node routes the guest's and the container's networks
// through the pod, and the instance claims both addresses, so that only
// the TTL stands between the container and the token.
func TestTokenHopLimitBehindMasquerade(t *testing.T) {
	unshare := testtools.Require(t, "unshare")
	testtools.Require(t, "nsenter")
	testtools.Require(t, "ip")
	testtools.Require(t, "sysctl")
	if os.Geteuid() != 0 {
		testtools.Missing(t, "network namespaces need root")
	}
	node, pod, guest, nested := newNetns(t, unshare), newNetns(t, unshare), newNetns(t, unshare), newNetns(t, unshare)
	for _, n := range []*netns{node, pod, guest, nested} {
		n.ip(t, "link", "set", "lo", "up")
	}
	// node n0 10.244.0.1 ↔ pod eth0 10.244.0.10 (a veth CNI).
	node.ip(t, "link", "add", "n0", "type", "veth", "peer", "name", "eth0", "netns", pod.pid())
	node.ip(t, "addr", "add", "10.244.0.1/24", "dev", "n0")
	node.ip(t, "link", "set", "n0", "up")
	node.ip(t, "route", "add", "10.0.2.0/24", "via", "10.244.0.10")
	node.ip(t, "route", "add", "172.17.0.0/24", "via", "10.244.0.10")
	pod.ip(t, "addr", "add", "10.244.0.10/24", "dev", "eth0")
	pod.ip(t, "link", "set", "eth0", "up")
	// pod k6t 10.0.2.1 ↔ guest eth0 10.0.2.2 (KubeVirt's masquerade
	// addresses), the pod routing between them.
	pod.ip(t, "link", "add", "k6t", "type", "veth", "peer", "name", "eth0", "netns", guest.pid())
	pod.ip(t, "addr", "add", "10.0.2.1/24", "dev", "k6t")
	pod.ip(t, "link", "set", "k6t", "up")
	pod.ip(t, "route", "add", "default", "via", "10.244.0.1")
	pod.ip(t, "route", "add", "172.17.0.0/24", "via", "10.0.2.2")
	pod.sysctl(t, "net.ipv4.ip_forward", "1")
	guest.ip(t, "addr", "add", "10.0.2.2/24", "dev", "eth0")
	guest.ip(t, "link", "set", "eth0", "up")
	guest.ip(t, "route", "add", "default", "via", "10.0.2.1")
	// guest docker0 172.17.0.1 ↔ nested eth0 172.17.0.2.
	guest.ip(t, "link", "add", "docker0", "type", "veth", "peer", "name", "eth0", "netns", nested.pid())
	guest.ip(t, "addr", "add", "172.17.0.1/24", "dev", "docker0")
	guest.ip(t, "link", "set", "docker0", "up")
	guest.sysctl(t, "net.ipv4.ip_forward", "1")
	nested.ip(t, "addr", "add", "172.17.0.2/24", "dev", "eth0")
	nested.ip(t, "link", "set", "eth0", "up")
	nested.ip(t, "route", "add", "default", "via", "172.17.0.1")

	for _, tc := range []struct {
		hopLimit   int
		nestedGets bool
	}{{1, false}, {2, true}} {
		t.Run(fmt.Sprintf("tokenHopLimit=%d", tc.hopLimit), func(t *testing.T) {
			rec := testRecord(t, fmt.Sprintf(`apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata: {name: vm}
spec:
  metadataServer: {addresses: [10.0.2.2, 172.17.0.2], tokenHopLimit: %d}
`, tc.hopLimit), "1")
			var ln net.Listener
			node.in(t, func() { ln, _ = net.Listen("tcp", "10.244.0.1:0") })
			if ln == nil {
				t.Fatal("cannot listen in the node's namespace")
			}
			srv := NewServer(NewHandler(testStore(t, rec), Options{GuestHops: 1, Logger: quietLogger()}))
			go srv.Serve(ln)
			defer srv.Close()
			token := func(from *netns) (string, error) {
				var conn net.Conn
				var err error
				from.in(t, func() { conn, err = net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second) })
				if err != nil {
					return "", err
				}
				defer conn.Close()
				// The connection is made (its handshake's TTL is the
				// system's); only the answer carries the hop limit.
				fmt.Fprintf(conn, "PUT /latest/api/token HTTP/1.1\r\nHost: 169.254.169.254\r\n%s: 60\r\nConnection: close\r\n\r\n", HeaderTokenTTL)
				conn.SetReadDeadline(time.Now().Add(3 * time.Second))
				b, err := io.ReadAll(conn)
				if len(b) == 0 {
					return "", fmt.Errorf("no answer: %v", err)
				}
				resp := string(b)
				if !strings.HasPrefix(resp, "HTTP/1.1 200") {
					return "", fmt.Errorf("answer %q", resp)
				}
				return resp, nil
			}
			if _, err := token(guest); err != nil {
				t.Fatalf("the guest, two namespaces from the agent: %v", err)
			}
			before := guest.inHdrErrors(t)
			_, err := token(nested)
			switch {
			case tc.nestedGets && err != nil:
				t.Errorf("the nested container, with tokenHopLimit 2: %v", err)
			case !tc.nestedGets && err == nil:
				t.Error("the nested container got a token through the guest's bridge")
			case !tc.nestedGets && guest.inHdrErrors(t) == before:
				t.Errorf("the nested container got no token, but the guest dropped nothing for its TTL: %v", err)
			}
		})
	}
}
