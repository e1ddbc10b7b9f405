package network_test

import (
	"fmt"

	"github.com/vminit/vminit/network"
	"github.com/vminit/vminit/spec"
)

func ExampleV2() {
	n := &spec.Network{Ethernets: map[string]spec.Ethernet{
		"lan": {
			Match:   &spec.Match{MACAddress: "52:54:00:12:34:56"},
			SetName: "lan",
			Interface: spec.Interface{
				Addresses:   []string{"192.0.2.10/24"},
				Gateway4:    "192.0.2.1",
				Nameservers: &spec.Nameservers{Addresses: []string{"192.0.2.53"}},
			},
		},
	}}
	out, err := network.V2(n)
	if err != nil {
		panic(err)
	}
	fmt.Print(string(out))
	// Output:
	// version: 2
	// ethernets:
	//   lan:
	//     match:
	//       macaddress: "52:54:00:12:34:56"
	//     set-name: lan
	//     addresses: [192.0.2.10/24]
	//     routes:
	//       - to: 0.0.0.0/0
	//         via: 192.0.2.1
	//     nameservers:
	//       addresses: [192.0.2.53]
}

// A ConfigDrive can only find a NIC by its MAC address.
func ExampleNetworkDataJSON_error() {
	n := &spec.Network{Ethernets: map[string]spec.Ethernet{
		"eth0": {Interface: spec.Interface{DHCP4: true}},
	}}
	_, err := network.NetworkDataJSON(n)
	fmt.Println(err)
	// Output:
	// spec.network.ethernets.eth0.match.macAddress: ConfigDrive's network_data.json matches NICs by MAC address; add one
}
