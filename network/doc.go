// Package network renders a vminit spec's network (spec.Network, shaped
// like netplan) into the three formats cloud-init reads:
//
//   - V2: network-config version 2, for NoCloud's network-config file (and
//     netplan itself);
//   - V1: network-config version 1, for consumers that only read v1;
//   - NetworkDataJSON: OpenStack's network_data.json, for ConfigDrive;
//
// and, for Ignition guests, which read no network-config (Ignition has no
// network section; package ignition writes these files with
// storage.files), into the files their own network service reads:
//
//   - NMKeyfiles: NetworkManager keyfiles (Fedora CoreOS, RHCOS);
//   - Networkd: systemd-networkd files (Flatcar).
//
// All five describe the same interfaces, addresses, routes (gateway4 and
// gateway6 become default routes in every format), DNS servers, MTUs,
// bonds, VLANs and bridges; the tests check this by parsing the
// cloud-init formats with cloud-init's own code and comparing the network
// states it builds, and the keyfiles and networkd files with what
// cloud-init's own NetworkManager and networkd renderers write for the
// same network. Output is stable: interfaces sorted by configuration ID,
// fields in a fixed order. Where a format cannot express something the spec says (a NIC
// without a MAC address in network_data.json, a name pattern in v1) the
// renderer returns spec.Errors naming the field instead of writing
// something that means less.
//
// The renderers expect a validated spec (spec.Load or Instance.Validate);
// they report, but do not re-check, every malformed value.
package network
