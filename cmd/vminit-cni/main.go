// Command vminit-cni is the chained CNI plugin that redirects a KubeVirt
// guest's requests for 169.254.169.254:80 to vminit's node agent from
// inside its virt-launcher pod (cmd/internal/cniplugin; installed on a
// node's CNI path and added to its conflist by the node agents'
// DaemonSet; docs/kubernetes.md, "How a guest reaches vminit").
package main

import "github.com/vminit/vminit/cmd/internal/cniplugin"

func main() { cniplugin.Main() }
