package run

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/spec"
)

// viaRelay starts the relay for inst and returns a base URL on 127.0.0.1
// whose connections are carried, one after the other, over one stream to
// the relay's socket, as QEMU's guestfwd carries a guest's: what
// cloud-init's own code sends reaches the relay as it would from a guest.
func viaRelay(t *testing.T, inst *spec.Instance) string {
	t.Helper()
	base, _ := viaNewRelay(t, inst)
	return base
}

// viaNewRelay is viaRelay, also returning the relay.
func viaNewRelay(t *testing.T, inst *spec.Instance) (string, *relay) {
	t.Helper()
	sock := relaySocket(t.TempDir())
	r, err := startRelay(inst, sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	stream, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stream.Close() })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	// Connections may stay open side by side (a client's pool); their
	// requests take turns on the stream, as a guest's do.
	var turn sync.Mutex
	answers := bufio.NewReader(stream)
	roundTrip := func(req *http.Request, c net.Conn) error {
		turn.Lock()
		defer turn.Unlock()
		if err := req.Write(stream); err != nil {
			return err
		}
		resp, err := http.ReadResponse(answers, req)
		if err != nil {
			return err
		}
		return resp.Write(c)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				requests := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(requests)
					if err != nil || roundTrip(req, c) != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + l.Addr().String(), r
}

func get(t *testing.T, base, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestServeAnswersTheGuestsDialects starts the in-process relay and asks
// it, over one stream as QEMU carries a guest's connections, what a guest
// asks, also with cloud-init 22.4's own datasource code.
func TestServeAnswersTheGuestsDialects(t *testing.T) {
	dev := loadSpec(t, "../../../examples/dev-vm.yaml")
	base := viaRelay(t, dev)
	for _, c := range []struct{ path, want string }{
		{"/latest/meta-data/local-hostname", "dev"},
		{"/openstack/latest/meta_data.json", `"name": "dev"`},
		{"/nocloud/meta-data", "local-hostname: dev"},
	} {
		code, body := get(t, base, c.path)
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
		cloudinittest.Run(t, cloudinittest.Ec2Client, map[string]any{"base": base, "src": "127.0.0.1", "aws": true}, &got)
		if !got.OK || got.Cloud != "aws" || got.Hostname != "dev" || !got.Token {
			t.Errorf("DataSourceEc2: %+v", got)
		}
	})
	t.Run("cloud-init OpenStack", func(t *testing.T) {
		var got struct {
			Metadata map[string]any `json:"metadata"`
			Userdata string         `json:"userdata"`
		}
		cloudinittest.Run(t, cloudinittest.OpenStackClient, map[string]any{"base": base, "src": "127.0.0.1"}, &got)
		if got.Metadata["hostname"] != "dev" || !strings.HasPrefix(got.Userdata, "#cloud-config") {
			t.Errorf("OpenStack MetadataReader: %+v", got)
		}
	})
	t.Run("cloud-init NoCloud-net", func(t *testing.T) {
		var got struct {
			MD map[string]any `json:"md"`
			UD string         `json:"ud"`
		}
		// The seed URL the SMBIOS serial gives, with the metadata
		// address replaced by where this test's stream takes it.
		seed := strings.Replace(strings.TrimPrefix((&config{Options: Options{Instance: dev}, dialect: "nocloud", agent: agentCloudInit}).smbios()[1], "type=1,serial=ds=nocloud-net;s="), "http://"+metadataAddr, base, 1)
		cloudinittest.Run(t, cloudinittest.NoCloudNetClient, map[string]any{"base": seed, "src": "127.0.0.1"}, &got)
		if got.MD["local-hostname"] != "dev" || !strings.HasPrefix(got.UD, "#cloud-config") {
			t.Errorf("read_seeded(%s): %+v", seed, got)
		}
	})

	// Ignition's aws platform reads the EC2 user data: the config.
	ibase := viaRelay(t, loadSpec(t, "../../../examples/fcos-server.yaml"))
	for _, path := range []string{"/2019-10-01/user-data", "/openstack/latest/user_data"} {
		code, body := get(t, ibase, path)
		var cfg struct{ Ignition struct{ Version string } }
		if code != 200 || json.Unmarshal([]byte(body), &cfg) != nil || cfg.Ignition.Version == "" {
			t.Errorf("Ignition's GET %s: %d %.200q", path, code, body)
		}
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
	if !strings.Contains(strings.Join(c.args(files{relay: "r"}), " "), "virtio-net-pci,netdev=net0,mac="+primaryMAC) {
		t.Error("NIC 0 does not carry the MAC the metadata names")
	}
	base := viaRelay(t, served)
	if code, body := get(t, base, "/2016-09-02/meta-data/network/interfaces/macs/"); code != 200 || !strings.Contains(body, primaryMAC) {
		t.Errorf("macs/: %d %q", code, body)
	}
	var got struct {
		OK bool `json:"ok"`
	}
	cloudinittest.Run(t, cloudinittest.Ec2Client, map[string]any{"base": base, "src": "127.0.0.1", "aws": true}, &got)
	if !got.OK {
		t.Error("cloud-init's Ec2 datasource does not read it")
	}
	c, _ = configure(Options{Instance: dev, Image: "x", Serve: true, Dialect: "openstack"})
	if c.servedInstance() != dev {
		t.Error("the openstack dialect serves a copy")
	}
}

// TestRelayStreamSurvivesBadRequests speaks to the relay's socket as
// QEMU does, one stream for every guest connection: garbage and a request
// cut off mid-way (the guest gave up on that connection) are answered 400
// and the next request on the stream is answered as if nothing happened;
// an over-long header is answered 400 once the relay has read its bound.
func TestRelayStreamSurvivesBadRequests(t *testing.T) {
	old := relayRequestTimeout
	relayRequestTimeout = 200 * time.Millisecond
	defer func() { relayRequestTimeout = old }()
	sock := relaySocket(t.TempDir())
	r, err := startRelay(loadSpec(t, "../../../examples/dev-vm.yaml"), sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if st, err := os.Stat(sock); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("relay socket: %v, mode %v; want 0600", err, st.Mode())
	}
	good := "GET /openstack/latest/meta_data.json HTTP/1.1\r\nHost: 169.254.169.254\r\nConnection: close\r\n\r\n"
	for _, c := range []struct {
		name, bad string
		recovers  bool
	}{
		{"garbage", "\x16\x03\x01 not http\r\n\r\n", true},
		{"cut off", "GET /openstack/latest/meta_data.json HTTP/1.1\r\nHost: 169.2", true},
		{"over-long", "GET / HTTP/1.1\r\nX: " + strings.Repeat("a", 2*relayMaxRequest) + "\r\n\r\n", false},
		{"10 GB body", "POST /openstack/latest/password HTTP/1.1\r\nContent-Length: 10737418240\r\n\r\n" + strings.Repeat("a", 2*relayMaxRequest), false},
	} {
		stream, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		stream.SetDeadline(time.Now().Add(time.Minute)) // against a hang, not a measure
		answers := bufio.NewReader(stream)
		ask := func(req string) (int, string) {
			if _, err := io.WriteString(stream, req); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			resp, err := http.ReadResponse(answers, nil)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		if code, _ := ask(c.bad); code != http.StatusBadRequest {
			t.Errorf("%s: %d; want 400", c.name, code)
		}
		if c.recovers {
			if code, body := ask(good); code != http.StatusOK || !strings.Contains(body, `"name": "dev"`) {
				t.Errorf("after %s: %d %q; want the instance's metadata", c.name, code, body)
			}
		}
		stream.Close()
	}
}

// TestRelayPassesRequestBodies: the relay hands the handler the body it
// read, so the password cloudbase-init posts (OpenStack) is the one the
// guest reads back; an empty one was stored before, and the real one was
// then refused as a second post.
func TestRelayPassesRequestBodies(t *testing.T) {
	sock := relaySocket(t.TempDir())
	r, err := startRelay(loadSpec(t, "../../../examples/dev-vm.yaml"), sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	stream, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	stream.SetDeadline(time.Now().Add(time.Minute)) // against a hang, not a measure
	answers := bufio.NewReader(stream)
	ask := func(req string) (int, string) {
		if _, err := io.WriteString(stream, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(answers, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	const secret = "encrypted-password"
	post := fmt.Sprintf("POST /openstack/latest/password HTTP/1.1\r\nHost: 169.254.169.254\r\nContent-Length: %d\r\n\r\n%s", len(secret), secret)
	if code, _ := ask(post); code != http.StatusOK {
		t.Fatalf("POST password: %d", code)
	}
	if code, body := ask("GET /openstack/latest/password HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n"); code != http.StatusOK || body != secret {
		t.Errorf("GET password: %d %q; want %q", code, body, secret)
	}
}
