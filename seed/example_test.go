package seed_test

import (
	"fmt"
	"io/fs"

	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

func ExampleBuild() {
	inst, _, err := spec.Decode([]byte(`
apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata:
  name: dev
spec:
  sshAuthorizedKeys:
    - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIONt2I6iEtv+xHflGoJXSrd2rBDr+0iYXnkjzE2Dueal alice@example.com
  network:
    ethernets:
      eth0: {dhcp4: true}
`))
	if err != nil {
		panic(err)
	}
	inst.Default()
	if err := inst.Validate(); err != nil {
		panic(err)
	}
	s, err := seed.Build(inst, seed.NoCloud, seed.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Println("label:", s.Label)
	fs.WalkDir(s.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if !d.IsDir() {
			data, _ := fs.ReadFile(s.FS(), p)
			fmt.Printf("--- %s\n%s", p, data)
		}
		return nil
	})
	// Output:
	// label: cidata
	// --- meta-data
	// instance-id: 245b0679-40e8-5f6e-8d21-4be094324617
	// local-hostname: dev
	// public-keys:
	//   - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIONt2I6iEtv+xHflGoJXSrd2rBDr+0iYXnkjzE2Dueal alice@example.com
	// --- network-config
	// version: 2
	// ethernets:
	//   eth0:
	//     dhcp4: true
	// --- user-data
	// #cloud-config
	// hostname: dev
}

// A ConfigDrive cannot express a NIC without a MAC address; the error names
// the field, as spec validation errors do.
func ExampleBuild_configDriveError() {
	inst := &spec.Instance{
		APIVersion: spec.APIVersion, Kind: spec.Kind,
		Metadata: spec.Metadata{Name: "dev"},
		Spec: spec.Spec{Network: &spec.Network{Ethernets: map[string]spec.Ethernet{
			"eth0": {Interface: spec.Interface{DHCP4: true}},
		}}},
	}
	inst.Default()
	_, err := seed.Build(inst, seed.ConfigDrive, seed.Options{})
	for _, e := range spec.AsErrors(err) {
		fmt.Println(e)
	}
	// Output:
	// spec.network.ethernets.eth0.match.macAddress: ConfigDrive's network_data.json matches NICs by MAC address; add one
}

// A metadata server that answers several datasources renders the user data
// once and each datasource's other files when a guest asks for them.
func ExampleMetadata() {
	inst, _, err := spec.Decode([]byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: dev}\n"))
	if err != nil {
		panic(err)
	}
	inst.Default()
	userData, err := seed.UserData(inst)
	if err != nil {
		panic(err)
	}
	fmt.Printf("user data: %q\n", userData)
	for _, ds := range []seed.Datasource{seed.NoCloud, seed.ConfigDrive} {
		files, err := seed.Metadata(inst, ds, seed.Options{})
		if err != nil {
			panic(err)
		}
		for _, f := range files {
			fmt.Println(ds, f.Path)
		}
	}
	// Output:
	// user data: "#cloud-config\nhostname: dev\n"
	// nocloud meta-data
	// configdrive openstack/latest/meta_data.json
}

// BuildError finds what Build would refuse (here a NIC ConfigDrive
// cannot express) without encoding the documents that cannot fail: a
// server that checks every instance it loads keeps no rendering.
func ExampleBuildError() {
	inst, err := spec.Parse([]byte(`
apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata: {name: dev}
spec:
  network:
    ethernets:
      eth0: {dhcp4: true}
`), "")
	if err != nil {
		panic(err)
	}
	fmt.Println(seed.BuildError(inst, seed.NoCloud, seed.Options{}))
	fmt.Println(seed.BuildError(inst, seed.ConfigDrive, seed.Options{}))
	// Output:
	// <nil>
	// spec.network.ethernets.eth0.match.macAddress: ConfigDrive's network_data.json matches NICs by MAC address; add one
}
