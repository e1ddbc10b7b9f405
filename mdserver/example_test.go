package mdserver_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"

	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

// A metadata server for one instance whose requests come from 127.0.0.1,
// read the way cloud-init's Ec2 datasource reads it.
func ExampleNewHandler() {
	inst, _, err := spec.Decode([]byte(`apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata:
  name: web-1
spec:
  instanceID: i-0123456789abcdef0
  metadataServer:
    addresses: [127.0.0.1]
`))
	if err != nil {
		panic(err)
	}
	inst.Default()
	rec, err := registry.NewRecord(inst, "rev-1")
	if err != nil {
		panic(err)
	}
	store, err := registry.NewStaticStore([]*registry.Record{rec})
	if err != nil {
		panic(err)
	}
	h := mdserver.NewHandler(store, mdserver.Options{Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewUnstartedServer(h)
	srv.Config = mdserver.NewServer(h) // timeouts, and ConnContext for the IMDSv2 hop limit
	srv.Start()
	defer srv.Close()

	for _, p := range []string{"/latest/meta-data/instance-id", "/latest/meta-data/placement/", "/openstack/latest/meta_data.json"} {
		res, err := http.Get(srv.URL + p)
		if err != nil {
			panic(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		fmt.Printf("%s -> %d\n%s\n", p, res.StatusCode, b)
	}
	// Output:
	// /latest/meta-data/instance-id -> 200
	// i-0123456789abcdef0
	// /latest/meta-data/placement/ -> 200
	// availability-zone
	// region
	// /openstack/latest/meta_data.json -> 200
	// {
	//   "uuid": "i-0123456789abcdef0",
	//   "name": "web-1",
	//   "hostname": "web-1",
	//   "launch_index": 0,
	//   "public_keys": {}
	// }
}
