package kubetest

// Version is the Kubernetes release whose kube-apiserver (and kubectl) the
// tests run. scripts/install-kube-apiserver.sh reads this line to know what
// to build; go.mod's k8s.io/client-go, k8s.io/api and k8s.io/apimachinery are
// the matching v0.x.y (TestClientMatchesServer checks it).
const Version = "v1.36.3"
