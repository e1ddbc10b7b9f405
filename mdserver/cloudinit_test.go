package mdserver

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
)

// The real cloud-init clients (cloudinittest).
const (
	pyEc2       = cloudinittest.Ec2Client
	pyOpenStack = cloudinittest.OpenStackClient
	pyNoCloud   = cloudinittest.NoCloudNetClient
)

func TestCloudInitEc2(t *testing.T) {
	cloudinittest.Require(t)
	store := testStore(t,
		testRecord(t, instanceDoc("vm-a", []string{"127.0.0.2"}, "    imdsv2: required\n"), "1"),
		testRecord(t, instanceDoc("vm-bb", []string{"127.0.0.3"}, ""), "1"))
	srv, _ := serve(t, NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger()}))
	for _, tc := range []struct {
		name, src, inst string
		aws             bool
	}{
		{"aws-imdsv2-required", "127.0.0.2", "vm-a", true},
		{"plain", "127.0.0.3", "vm-bb", false},
		{"aws-optional", "127.0.0.3", "vm-bb", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got struct {
				OK         bool
				Cloud      string
				Metadata   map[string]any
				InstanceID string `json:"instance_id"`
				Userdata   string
				Keys       []string
				Identity   map[string]any
				Hostname   string
				Token      bool
			}
			cloudinittest.Run(t, pyEc2, map[string]any{"base": srv.URL, "src": tc.src, "aws": tc.aws}, &got)
			rec, _ := store.Snapshot().ByName(tc.inst)
			if !got.OK || got.InstanceID != rec.Instance().Spec.InstanceID {
				t.Fatalf("get_data: %+v", got)
			}
			if got.Token != tc.aws || (tc.aws && got.Cloud != "aws") {
				t.Errorf("token used %v, cloud %q", got.Token, got.Cloud)
			}
			if !strings.HasPrefix(got.Userdata, "#cloud-config") || !strings.Contains(got.Userdata, "alice") {
				t.Errorf("user-data %q", got.Userdata)
			}
			if len(got.Keys) != 1 || got.Keys[0] != testKey {
				t.Errorf("keys %q", got.Keys)
			}
			if got.Hostname != tc.inst {
				t.Errorf("hostname %q", got.Hostname)
			}
			if got.Metadata["local-ipv4"] == nil || got.Metadata["placement"] == nil {
				t.Errorf("metadata %v", got.Metadata)
			}
			if tc.aws && got.Identity["instanceId"] != rec.Instance().Spec.InstanceID {
				t.Errorf("identity %v", got.Identity)
			}
		})
	}
}

func TestCloudInitOpenStack(t *testing.T) {
	cloudinittest.Require(t)
	store := twoInstances(t, "")
	srv, _ := serve(t, NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger()}))
	var got struct {
		Metadata    map[string]any
		Userdata    string
		Networkdata map[string]any
	}
	cloudinittest.Run(t, pyOpenStack, map[string]any{"base": srv.URL, "src": "127.0.0.3"}, &got)
	rec, _ := store.Snapshot().ByName("vm-bb")
	if got.Metadata["uuid"] != rec.Instance().Spec.InstanceID || got.Metadata["hostname"] != "vm-bb.example.com" {
		t.Errorf("metadata %v", got.Metadata)
	}
	if !strings.HasPrefix(got.Userdata, "#cloud-config") {
		t.Errorf("userdata %q", got.Userdata)
	}
	if links, _ := got.Networkdata["links"].([]any); len(links) != 1 {
		t.Errorf("network data %v", got.Networkdata)
	}
}

func TestCloudInitNoCloud(t *testing.T) {
	cloudinittest.Require(t)
	store := twoInstances(t, "")
	srv, _ := serve(t, NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger()}))
	for _, who := range [][2]string{{"127.0.0.2", "vm-a"}, {"127.0.0.3", "vm-bb"}} {
		var got struct {
			MD map[string]any
			UD string
		}
		cloudinittest.Run(t, pyNoCloud, map[string]any{"base": srv.URL + "/nocloud/", "src": who[0]}, &got)
		rec, _ := store.Snapshot().ByName(who[1])
		if got.MD["instance-id"] != rec.Instance().Spec.InstanceID || got.MD["local-hostname"] != who[1]+".example.com" {
			t.Errorf("%s: meta-data %v", who[1], got.MD)
		}
		if !strings.HasPrefix(got.UD, "#cloud-config") {
			t.Errorf("%s: user-data %q", who[1], got.UD)
		}
	}

}

// headerLog records the headers of every request a client sends, by
// method and path, as one line each.
type headerLog struct {
	mu   sync.Mutex
	seen []string
	next http.Handler
}

func (l *headerLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var hs []string
	for k, v := range r.Header {
		hs = append(hs, k+": "+strings.Join(v, ","))
	}
	slices.Sort(hs)
	l.mu.Lock()
	l.seen = append(l.seen, r.Method+" "+r.URL.Path+" | "+strings.Join(hs, " | "))
	l.mu.Unlock()
	l.next.ServeHTTP(w, r)
}

func (l *headerLog) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// TestCloudInitDialectGate: what cloud-init 22.4's OpenStack and NoCloud
// datasources send (the User-Agent, no IMDSv2 token, no flavor header: the
// reason imdsv2: required serves only EC2 by default) and that they are
// refused for an instance with imdsv2: required, and served once
// spec.metadataServer.dialects lists them.
func TestCloudInitDialectGate(t *testing.T) {
	cloudinittest.Require(t)
	store := testStore(t,
		testRecord(t, instanceDoc("req", []string{"127.0.0.2"}, "    imdsv2: required\n"), "1"),
		testRecord(t, instanceDoc("listed", []string{"127.0.0.3"}, "    imdsv2: required\n    dialects: [ec2, openstack, nocloud]\n"), "1"))
	log := &headerLog{next: NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger()})}
	srv, _ := serve(t, log)
	for _, tc := range []struct {
		name, src string
		served    bool
	}{{"required", "127.0.0.2", false}, {"listed", "127.0.0.3", true}} {
		var ostk struct {
			Metadata map[string]any
		}
		err := cloudinittest.RunErr(t, pyOpenStack, map[string]any{"base": srv.URL, "src": tc.src}, &ostk)
		if (err == nil && ostk.Metadata["name"] == tc.name) != tc.served {
			t.Errorf("OpenStack datasource, %s: served %v (%v)", tc.name, ostk.Metadata["name"], err)
		}
		var nc struct{ UD string }
		err = cloudinittest.RunErr(t, pyNoCloud, map[string]any{"base": srv.URL + "/nocloud/", "src": tc.src}, &nc)
		if (err == nil && strings.HasPrefix(nc.UD, "#cloud-config")) != tc.served {
			t.Errorf("NoCloud datasource, %s: user-data %.40q (%v)", tc.name, nc.UD, err)
		}
	}
	for _, l := range log.lines() {
		t.Logf("cloud-init sent: %s", l)
		if strings.Contains(l, "X-Aws-Ec2-Metadata-Token") || strings.Contains(l, "Metadata-Flavor") || !strings.Contains(l, "User-Agent: Cloud-Init/") {
			t.Errorf("cloud-init's OpenStack or NoCloud datasource sent more than assumed: %s", l)
		}
	}
}
