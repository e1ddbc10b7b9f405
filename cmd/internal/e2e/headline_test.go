package e2e

import (
	"testing"

	"github.com/vminit/vminit/cmd/internal/run"
	"github.com/vminit/vminit/internal/testing/guesttest"
	"github.com/vminit/vminit/spec"
)

// stockOffline makes the test guest what a stock Debian cloud image is to
// `vminit run` on a machine without outbound network: apt's sources name a
// mirror (one that refuses at once, as an unreachable one eventually
// does), and none of the packages the test guest carries for the other
// examples (git, make) is installed. It runs as early boot commands, before
// cloud-init's package module, and is the only thing added to the example.
var stockOffline = []spec.Command{
	{Shell: "echo 'deb http://127.0.0.1:9/debian bookworm main' > /etc/apt/sources.list"},
	{Shell: "dpkg --remove --force-depends git make >/dev/null 2>&1 || true"},
}

// TestHeadlineExampleOnAStockImage is README's headline `vminit run
// examples/dev-vm.yaml --image debian-12-genericcloud-amd64.qcow2`: the
// example as written reaches done on a stock image with no outbound
// network: nothing in it needs a mirror.
func TestHeadlineExampleOnAStockImage(t *testing.T) {
	im := guesttest.Find(t)
	inst, err := spec.Load(devVM)
	if err != nil {
		t.Fatal(err)
	}
	inst.Spec.BootCommands = append(stockOffline, inst.Spec.BootCommands...)
	res, rep := bootGuest(t, run.Options{Instance: inst, Image: im.CloudInitDisk}, true)
	c := startCheck(t, res, rep, "cloud-init", 1)
	c.text("hostname", "dev")
	c.keyFor("/home/debian", aliceKey)
	c.done()
}
