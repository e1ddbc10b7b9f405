package admin_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"

	"github.com/vminit/vminit/mdserver/admin"
	"github.com/vminit/vminit/mdserver/dirstore"
)

// The admin API over a directory store, driven by its Go client, as
// `vminit instances` does.
func Example() {
	dir, err := os.MkdirTemp("", "instances")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	quiet := slog.New(slog.DiscardHandler)
	store, err := dirstore.Open(dir, dirstore.Options{NoWatch: true, Logger: quiet})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	const token = "example-token-0123456789"
	srv := httptest.NewServer(admin.NewHandler(store, admin.Options{Token: token, Logger: quiet}))
	defer srv.Close()

	ctx := context.Background()
	c := &admin.Client{URL: srv.URL, Token: token}
	s, err := c.Put(ctx, "web-1", []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: web-1}\nspec:\n  metadataServer: {addresses: [10.0.0.1]}\n"))
	if err != nil {
		panic(err)
	}
	fmt.Println("stored", s.Name, s.Addresses)
	p, err := c.Preview(ctx, "web-1", "ec2")
	if err != nil {
		panic(err)
	}
	for _, f := range p.Files[:3] {
		fmt.Println(f.Path)
	}
	_, err = c.Put(ctx, "web-2", []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: web-2}\nspec:\n  metadataServer: {addresses: [10.0.0.1]}\n"))
	fmt.Println(err)
	// Output:
	// stored web-1 [10.0.0.1]
	// /latest/meta-data/ami-id
	// /latest/meta-data/ami-launch-index
	// /latest/meta-data/ami-manifest-path
	// address claimed by two instances: 10.0.0.1 is claimed by web-1.yaml (instance "web-1") (409 Conflict)
}
