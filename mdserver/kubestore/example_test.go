package kubestore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/vminit/vminit/mdserver/kubestore"
	"github.com/vminit/vminit/platform/cluster"
)

// A metadata server's instances from a cluster. (Not run as a test: it
// needs a cluster; the package's tests start a real API server.)
func ExampleOpen() {
	cfg, _, err := cluster.Load("", "") // $KUBECONFIG, ~/.kube/config, or the pod's service account
	if err != nil {
		log.Fatal(err)
	}
	store, err := kubestore.Open(context.Background(), kubestore.Config{REST: cfg, Namespaces: []string{"vms"}, KubeVirt: true})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	fmt.Println(store.Snapshot().Names())
}
