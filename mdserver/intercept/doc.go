// Package intercept brings a guest's request for 169.254.169.254:80 (or
// EC2's IPv6 metadata address, [fd00:ec2::254]:80) to vminit's node
// agent: it installs and removes vminit's own nftables tables, "ip
// vminit" and, on a node with an IPv6 agent address, "ip6 vminit", in a
// network namespace.
//
// A Kubernetes pod (so a KubeVirt guest, once its virt-launcher pod's
// masquerade has made its packets the pod's) that asks for the
// link-local metadata address follows its node's default route: to
// nowhere, or on a cloud node to the cloud's own metadata service, which
// answers with the node's credentials. The table redirects that request
// to the node agent, keeping its source address (the pod IP is how the
// agent knows which VM asks), and drops whatever else a pod sends to
// 169.254.169.254, so that no pod's packet to it is ever routed on to the
// cloud's service. There are two data paths, one per kind of CNI
// (docs/kubernetes.md, "How a guest reaches vminit"):
//
//   - Host (Host): in the node's network namespace, for CNIs whose pod
//     traffic crosses the node's netfilter (bridge, kindnet, Flannel,
//     Calico, Cilium without eBPF host routing). The redirect and the
//     drop match the pods' interfaces by name or prefix
//     (DefaultPodInterfaces).
//   - Pod (Pod): inside one virt-launcher pod's network namespace, for
//     CNIs that bypass the node's netfilter (OVN-Kubernetes, Cilium with
//     eBPF host routing); the chained CNI plugin vminit-cni installs it
//     (cmd/internal/cniplugin).
//
// The table is written through netlink with github.com/google/nftables,
// not by running nft: the node agent's image and a CNI plugin's host
// have no nft binary to rely on, the rules are built as values (no text
// to quote or parse), and one netlink batch is one kernel transaction, so
// an install replaces the table whole or not at all. Only the tables
// named TableName in the ip and ip6 families are ever written or deleted
// (one per family, not one inet table: a node without IPv6 keeps the
// IPv4 table alone, and a kernel without IPv6 nf_tables is no obstacle
// to it); every other
// table (kube-proxy's, the CNI's, KubeVirt's) is left as it is. Each rule
// carries its own text as its comment, which is what Check compares and
// what `nft list table ip vminit` shows an operator.
//
// The package builds everywhere; on systems other than Linux, Install,
// Remove and Check return an error wrapping errors.ErrUnsupported.
package intercept
