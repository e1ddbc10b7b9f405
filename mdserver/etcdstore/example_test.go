package etcdstore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/vminit/vminit/mdserver/etcdstore"
)

// Replicas of `vminit serve` share their instances through etcd. (Not run
// as a test: it needs an etcd at the endpoint; the package's tests start a
// real one.)
func ExampleOpen() {
	ctx := context.Background()
	store, err := etcdstore.Open(ctx, etcdstore.Config{Endpoints: []string{"http://127.0.0.1:2379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Put(ctx, []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: web-1}\nspec:\n  metadataServer: {addresses: [10.0.0.1]}\n")); err != nil {
		log.Fatal(err)
	}
	fmt.Println(store.Snapshot().Names()) // every replica sees web-1 once its watch delivers it
}
