package run

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testing/guesttest"
	"github.com/vminit/vminit/internal/testing/qemutest"
	"github.com/vminit/vminit/internal/testing/testtools"
)

// relayGuestScript runs in a busybox guest on `run --serve`'s network: it
// asks the metadata server many times, opens many connections it never
// uses (an attack once found: each started a host shell), asks again,
// and tries the host's loopback (through QEMU's host address), then waits
// to be stopped. HOSTPORT is a listener on the host's 127.0.0.1.
const relayGuestScript = `
ip link set eth0 up
ip addr add 169.254.169.15/24 dev eth0
ip route add default via 169.254.169.2
{ echo SSH-PORT-FORWARDED | nc -l -p 22; } &
# md asks once and hangs up when the answer is in (busybox's wget crashes
# in a static build, and a metadata server never closes first).
md() {
	: > /tmp/answer
	printf 'GET /openstack/latest/meta_data.json HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n' | nc 169.254.169.254 80 > /tmp/answer &
	_n=0
	while ! grep -q '"name": "dev"' /tmp/answer && [ $_n -lt 200 ]; do usleep 50000; _n=$((_n+1)); done
	kill $! 2>/dev/null
	grep -q '"name": "dev"' /tmp/answer
}
ok=0 i=0
while [ $i -lt @REQUESTS@ ]; do
	md && ok=$((ok+1))
	i=$((i+1))
done
echo "RELAY-ANSWERED $ok"
i=0
while [ $i -lt @SILENT@ ]; do
	{ sleep 3600 | nc 169.254.169.254 80 >/dev/null 2>&1; } &
	i=$((i+1))
done
sleep 2
echo "SILENT-OPEN $(netstat -tn 2>/dev/null | grep -c '169.254.169.254:80 .*ESTABLISHED')"
md && echo "RELAY-AFTER-SILENT ok" || echo "RELAY-AFTER-SILENT failed"
echo | nc -w 3 169.254.169.2 @HOSTPORT@ && echo "HOST-LOOPBACK reached" || echo "HOST-LOOPBACK unreachable"
echo "GUEST-DONE"
sleep 3600
`

// TestRelayIsInProcessAndRestricted boots a real kernel with `run
// --serve`'s QEMU command line and a busybox guest that asks the metadata
// server 20 times, then holds 100 connections open without a word: every
// request is answered, QEMU starts no process for any of them (the relay
// is in-process), the server still answers after the silent ones, and
// the guest cannot reach a listener on the host's loopback (restrict=on),
// while --ssh-port still reaches the guest.
func TestRelayIsInProcessAndRestricted(t *testing.T) {
	kernel := bootKernel(t)
	requireModule(t, "virtio_net")
	shortGrace(t, time.Second)
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	script := strings.NewReplacer("@REQUESTS@", "20", "@SILENT@", "100",
		"@HOSTPORT@", strconv.Itoa(host.Addr().(*net.TCPAddr).Port)).Replace(relayGuestScript)
	initrd := qemutest.Initramfs(t, script)
	sshPort := testtools.FreePort(t)
	g := start(t, Options{Instance: loadSpec(t, "../../../examples/dev-vm.yaml"), Serve: true, Dialect: "openstack", SSHPort: sshPort,
		Kernel: kernel, Initrd: initrd, Append: "console=ttyS0 quiet " + guesttest.NoTimerCheck, Memory: "256M", CPUs: 1})
	waitConsole(t, g, "GUEST-DONE")
	console := string(g.Console())
	want := map[string]string{
		"RELAY-ANSWERED":     "20",
		"SILENT-OPEN":        "100",
		"RELAY-AFTER-SILENT": "ok",
		"HOST-LOOPBACK":      "unreachable",
	}
	for key, w := range want {
		m := regexp.MustCompile(key + ` (\S+)`).FindStringSubmatch(console)
		if m == nil || m[1] != w {
			t.Errorf("guest says %s %v; want %s", key, m, w)
		}
	}
	if n := children(t, g.cmd.Process.Pid); n != 0 {
		t.Errorf("QEMU has %d child processes with 100 guest connections open; want none", n)
	}
	if n := g.relay.l.Addr().Network(); n != "unix" {
		t.Errorf("the relay listens on %s; want only a Unix socket", n)
	}
	// --ssh-port's forward still reaches the guest under restrict=on.
	if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(sshPort))); err != nil {
		t.Errorf("--ssh-port: %v", err)
	} else {
		c.SetDeadline(time.Now().Add(time.Minute)) // against a hang, not a measure
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if line != "SSH-PORT-FORWARDED\n" {
			t.Errorf("--ssh-port: the guest's port 22 said %q", line)
		}
	}
	host.(*net.TCPListener).SetDeadline(time.Now())
	if c, err := host.Accept(); err == nil {
		c.Close()
		t.Error("the guest connected to a listener on the host's loopback")
	}
	if t.Failed() {
		t.Logf("console:\n%s", tail(g.Console(), 40))
	}
}

// requireModule skips (or fails under CI) when the test kernel lacks a
// module.
func requireModule(t *testing.T, name string) {
	t.Helper()
	k := qemutest.FindKernel(t)
	for _, m := range k.Modules {
		if strings.TrimSuffix(filepath.Base(m), ".ko") == name {
			return
		}
	}
	testtools.Missing(t, "the test kernel in "+k.Dir+" lacks "+name+": rerun scripts/install-test-kernel.sh")
}

// children counts the processes whose parent is pid.
func children(t *testing.T, pid int) int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so from the last ')'.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			n++
		}
	}
	return n
}
