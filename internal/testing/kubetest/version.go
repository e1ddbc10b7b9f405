package kubetest

// Version is the Kubernetes release whose kube-apiserver (and kubectl) the
// tests run. scripts/install-kube-apiserver.sh reads this line to know what
// to build; go.mod's k8s.io/client-go, k8s.io/api and k8s.io/apimachinery are
// the matching v0.x.y (TestClientMatchesServer checks it).
const Version = "v1.36.3"

// EtcdVersion is the etcd release scripts/install-etcd.sh builds (it reads
// this line) for runs with kube-apiserver's watch cache on (Options): v1.36
// is built against etcd's v3.6 client and supports etcd 3.5 and 3.6.
const EtcdVersion = "v3.6.16"
