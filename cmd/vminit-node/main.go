// Command vminit-node is vminit's node agent: `vminit serve` on a node
// of a KubeVirt cluster that also installs, and removes when it stops,
// the interception bringing the node's guests' requests for
// 169.254.169.254 to it (cmd/internal/nodecmd; the DaemonSet in
// deploy/kubernetes/components/node-agent; docs/kubernetes.md, "How a
// guest reaches vminit").
package main

import (
	"os"

	"github.com/vminit/vminit/cmd/internal/nodecmd"
)

func main() {
	os.Exit(nodecmd.Main(os.Args[1:], os.Stdout, os.Stderr))
}
