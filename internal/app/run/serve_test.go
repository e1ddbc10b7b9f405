package run

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/internal/testing/testtools"
)

// relayGet sends one HTTP request through the relay QEMU runs for a guest
// connection: bash with the connection on its standard input and output,
// as libslirp's guestfwd cmd: starts it.
func relayGet(t *testing.T, port int, path string, header http.Header) (int, string) {
	t.Helper()
	bash := testtools.Require(t, "bash")
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	guest, relay := os.NewFile(uintptr(fds[0]), "guest"), os.NewFile(uintptr(fds[1]), "relay")
	defer guest.Close()
	cmd := exec.Command(bash, "-c", relayScript(port))
	cmd.Stdin, cmd.Stdout = relay, relay
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	relay.Close()
	req, _ := http.NewRequestWithContext(context.Background(), "GET", "http://169.254.169.254"+path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	if err := req.Write(guest); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(guest), req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	guest.Close() // the guest hangs up: the relay must end
	if err := cmd.Wait(); err != nil {
		t.Errorf("relay: %v", err)
	}
	return resp.StatusCode, string(body)
}

// TestServeAnswersTheGuestsDialects starts the in-process metadata server
// and asks it what a guest behind QEMU's user network asks, from
// 127.0.0.1 as slirp connects: through the relay for 169.254.169.254,
// directly for NoCloud-net at 10.0.2.2, and with cloud-init 22.4's own
// datasource code.
func TestServeAnswersTheGuestsDialects(t *testing.T) {
	dev := loadSpec(t, "../../../examples/dev-vm.yaml")
	srv, port, err := serve(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, c := range []struct{ path, want string }{
		{"/latest/meta-data/local-hostname", "dev"},
		{"/openstack/latest/meta_data.json", `"name": "dev"`},
		{"/nocloud/meta-data", "local-hostname: dev"},
	} {
		code, body := relayGet(t, port, c.path, nil)
		if code != 200 || !strings.Contains(body, c.want) {
			t.Errorf("GET %s through the relay: %d %q; want 200 with %q", c.path, code, body, c.want)
		}
	}

	t.Run("cloud-init Ec2", func(t *testing.T) {
		var got struct {
			OK         bool   `json:"ok"`
			Cloud      string `json:"cloud"`
			InstanceID string `json:"instance_id"`
			Hostname   string `json:"hostname"`
			Token      bool   `json:"token"`
			Keys       []string
		}
		cloudinittest.Run(t, cloudinittest.Ec2Client, map[string]any{"base": fmt.Sprintf("http://127.0.0.1:%d", port), "src": "127.0.0.1", "aws": true}, &got)
		if !got.OK || got.Cloud != "aws" || got.Hostname != "dev" || !got.Token {
			t.Errorf("DataSourceEc2: %+v", got)
		}
	})
	t.Run("cloud-init OpenStack", func(t *testing.T) {
		var got struct {
			Metadata map[string]any `json:"metadata"`
			Userdata string         `json:"userdata"`
		}
		cloudinittest.Run(t, cloudinittest.OpenStackClient, map[string]any{"base": fmt.Sprintf("http://127.0.0.1:%d", port), "src": "127.0.0.1"}, &got)
		if got.Metadata["hostname"] != "dev" || !strings.HasPrefix(got.Userdata, "#cloud-config") {
			t.Errorf("OpenStack MetadataReader: %+v", got)
		}
	})
	t.Run("cloud-init NoCloud-net", func(t *testing.T) {
		var got struct {
			MD map[string]any `json:"md"`
			UD string         `json:"ud"`
		}
		// The seed URL the SMBIOS serial gives, with the host as the
		// guest reaches it (10.0.2.2) replaced by where slirp connects.
		base := strings.Replace(strings.TrimPrefix((&config{dialect: "nocloud", agent: agentCloudInit}).smbios(files{mdPort: port})[1], "type=1,serial=ds=nocloud-net;s="), slirpHost, "127.0.0.1", 1)
		cloudinittest.Run(t, cloudinittest.NoCloudNetClient, map[string]any{"base": base, "src": "127.0.0.1"}, &got)
		if got.MD["local-hostname"] != "dev" || !strings.HasPrefix(got.UD, "#cloud-config") {
			t.Errorf("read_seeded(%s): %+v", base, got)
		}
	})

	// Ignition's aws platform reads the EC2 user data: the config.
	fcos := loadSpec(t, "../../../examples/fcos-server.yaml")
	isrv, iport, err := serve(fcos)
	if err != nil {
		t.Fatal(err)
	}
	defer isrv.Close()
	for _, path := range []string{"/2019-10-01/user-data", "/openstack/latest/user_data"} {
		code, body := relayGet(t, iport, path, nil)
		var cfg struct{ Ignition struct{ Version string } }
		if code != 200 || json.Unmarshal([]byte(body), &cfg) != nil || cfg.Ignition.Version == "" {
			t.Errorf("Ignition's GET %s: %d %.200q", path, code, body)
		}
	}
}

// TestServeOnlyOnLoopback: the server that lets 127.0.0.1 be the
// instance listens nowhere else.
func TestServeOnlyOnLoopback(t *testing.T) {
	srv, port, err := serve(loadSpec(t, "../../../examples/dev-vm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/latest/meta-data/instance-id", port))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("from 127.0.0.1: %d", resp.StatusCode)
	}
	out, _ := exec.Command("ss", "-Htln", fmt.Sprintf("sport = :%d", port)).Output()
	if s := strings.TrimSpace(string(out)); s != "" && !strings.Contains(s, "127.0.0.1:") {
		t.Errorf("listening beyond loopback: %s", s)
	}
}

// TestServedEC2InstanceNamesTheNIC: an EC2 guest of a spec without a
// network finds its NIC, by the MAC QEMU gives it, in the metadata; the
// caller's spec is unchanged, and the other dialects serve it as is.
func TestServedEC2InstanceNamesTheNIC(t *testing.T) {
	dev := loadSpec(t, "../../../examples/dev-vm.yaml")
	c, err := configure(Options{Instance: dev, Image: "x", Serve: true})
	if err != nil {
		t.Fatal(err)
	}
	served := c.servedInstance()
	if dev.Spec.Network != nil || served.Spec.Network == nil || c.macs[0] != primaryMAC {
		t.Fatalf("served network %+v, caller's %+v, NIC MACs %q", served.Spec.Network, dev.Spec.Network, c.macs)
	}
	if !strings.Contains(strings.Join(c.args(files{uuid: "u", relay: "r"}), " "), "virtio-net-pci,netdev=net0,mac="+primaryMAC) {
		t.Error("NIC 0 does not carry the MAC the metadata names")
	}
	srv, port, err := serve(served)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if code, body := relayGet(t, port, "/2016-09-02/meta-data/network/interfaces/macs/", nil); code != 200 || !strings.Contains(body, primaryMAC) {
		t.Errorf("macs/: %d %q", code, body)
	}
	var got struct {
		OK bool `json:"ok"`
	}
	cloudinittest.Run(t, cloudinittest.Ec2Client, map[string]any{"base": fmt.Sprintf("http://127.0.0.1:%d", port), "src": "127.0.0.1", "aws": true}, &got)
	if !got.OK {
		t.Error("cloud-init's Ec2 datasource does not read it")
	}
	c, _ = configure(Options{Instance: dev, Image: "x", Serve: true, Dialect: "openstack"})
	if c.servedInstance() != dev {
		t.Error("the openstack dialect serves a copy")
	}
}
