package mdserver

import (
	"testing"

	"github.com/vminit/vminit/internal/testing/cbitest"
	"github.com/vminit/vminit/seed"
)

// TestCloudbaseInit: cloudbase-init 1.1.9's own OpenStack and EC2
// metadata services read a Windows instance from the server, on
// loopback, and get what the spec says: identity, keys, the admin user and
// password (OpenStack only; EC2 has none), network_data.json (OpenStack),
// the user data its plugin runs with the executors the spec means; and
// its password POST is stored once, a second answered 409 (which it
// takes as "already set").
func TestCloudbaseInit(t *testing.T) {
	cbitest.Require(t)
	doc := cbitest.WinSpec("  metadataServer: {addresses: [127.0.0.1]}\n")
	rec := testRecord(t, doc, "1")
	srv, _ := serve(t, NewHandler(testStore(t, rec), Options{AllowLoopbackInstances: true, Logger: quietLogger()}))
	ud, err := seed.UserData(rec.Instance())
	if err != nil {
		t.Fatal(err)
	}
	t.Run("openstack", func(t *testing.T) {
		got := cbitest.Read(t, cbitest.OpenStack, srv.URL+"/")
		cbitest.CheckWin(t, rec.Instance(), got, ud, cbitest.Want{Admin: true, Network: true})
		if !got.CanPostPassword || !got.PostPassword || got.PostPasswordAgain != 409 || !got.IsPasswordSet {
			t.Errorf("password: can post %v, posted %v, posted again: %d, set %v; want true, true, 409, true",
				got.CanPostPassword, got.PostPassword, got.PostPasswordAgain, got.IsPasswordSet)
		}
	})
	t.Run("ec2", func(t *testing.T) {
		got := cbitest.Read(t, cbitest.EC2, srv.URL+"/")
		cbitest.CheckWin(t, rec.Instance(), got, ud, cbitest.Want{})
	})
}
