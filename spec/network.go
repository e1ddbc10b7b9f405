package spec

// Network is the guest's network configuration, shaped like netplan
// version 2 (the format cloud-init calls network-config v2). Maps are keyed
// by a configuration ID; renderers emit them in sorted order.
type Network struct {
	Ethernets map[string]Ethernet `yaml:"ethernets,omitempty" json:"ethernets,omitempty"`
	Bonds     map[string]Bond     `yaml:"bonds,omitempty" json:"bonds,omitempty"`
	VLANs     map[string]VLAN     `yaml:"vlans,omitempty" json:"vlans,omitempty"`
	Bridges   map[string]Bridge   `yaml:"bridges,omitempty" json:"bridges,omitempty"`
}

// Ethernet is a physical interface, selected by Match or, without Match, by
// the configuration ID as its kernel name.
type Ethernet struct {
	Match *Match `yaml:"match,omitempty" json:"match,omitempty"`
	// SetName renames the matched interface.
	SetName   string `yaml:"setName,omitempty" json:"setName,omitempty"`
	Interface `yaml:",inline" json:",inline"`
}

// Match selects a physical interface. Matching by MAC address is the only
// form every renderer can express (ConfigDrive's network_data.json and
// Ignition's keyfiles need it).
type Match struct {
	MACAddress string `yaml:"macAddress,omitempty" json:"macAddress,omitempty"`
	// Name is a kernel interface name; it may contain shell-style globs.
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
}

// Interface holds the settings shared by ethernets, bonds and VLANs.
type Interface struct {
	DHCP4 bool `yaml:"dhcp4,omitempty" json:"dhcp4,omitempty"`
	DHCP6 bool `yaml:"dhcp6,omitempty" json:"dhcp6,omitempty"`
	// Addresses are static addresses in CIDR form, e.g. 192.0.2.10/24.
	Addresses []string `yaml:"addresses,omitempty" json:"addresses,omitempty"`
	// Gateway4 and Gateway6 are shorthands for a default route.
	Gateway4    string       `yaml:"gateway4,omitempty" json:"gateway4,omitempty"`
	Gateway6    string       `yaml:"gateway6,omitempty" json:"gateway6,omitempty"`
	Routes      []Route      `yaml:"routes,omitempty" json:"routes,omitempty"`
	Nameservers *Nameservers `yaml:"nameservers,omitempty" json:"nameservers,omitempty"`
	MTU         int          `yaml:"mtu,omitempty" json:"mtu,omitempty"`
	// MACAddress sets the interface's MAC address (for bonds and VLANs,
	// or to override a NIC's).
	MACAddress string `yaml:"macAddress,omitempty" json:"macAddress,omitempty"`
}

// Route is a static route.
type Route struct {
	// To is a CIDR or "default".
	To     string `yaml:"to" json:"to"`
	Via    string `yaml:"via,omitempty" json:"via,omitempty"`
	Metric *int   `yaml:"metric,omitempty" json:"metric,omitempty"`
}

// Nameservers are DNS servers and search domains.
type Nameservers struct {
	Addresses []string `yaml:"addresses,omitempty" json:"addresses,omitempty"`
	Search    []string `yaml:"search,omitempty" json:"search,omitempty"`
}

// Bond aggregates interfaces listed by configuration ID.
type Bond struct {
	Interfaces []string        `yaml:"interfaces" json:"interfaces"`
	Parameters *BondParameters `yaml:"parameters,omitempty" json:"parameters,omitempty"`
	Interface  `yaml:",inline" json:",inline"`
}

// BondParameters are the bonding driver's settings.
type BondParameters struct {
	// Mode is one of balance-rr, active-backup, balance-xor, broadcast,
	// 802.3ad, balance-tlb, balance-alb.
	Mode               string `yaml:"mode,omitempty" json:"mode,omitempty"`
	MIIMonitorInterval *int   `yaml:"miiMonitorInterval,omitempty" json:"miiMonitorInterval,omitempty"`
	LACPRate           string `yaml:"lacpRate,omitempty" json:"lacpRate,omitempty"`
	TransmitHashPolicy string `yaml:"transmitHashPolicy,omitempty" json:"transmitHashPolicy,omitempty"`
	Primary            string `yaml:"primary,omitempty" json:"primary,omitempty"`
}

// Bridge is a Linux bridge over interfaces listed by configuration ID
// (ethernets, bonds or VLANs); the addresses are the bridge's.
type Bridge struct {
	Interfaces []string          `yaml:"interfaces,omitempty" json:"interfaces,omitempty"`
	Parameters *BridgeParameters `yaml:"parameters,omitempty" json:"parameters,omitempty"`
	Interface  `yaml:",inline" json:",inline"`
}

// BridgeParameters are a bridge's spanning tree settings.
type BridgeParameters struct {
	// STP turns the spanning tree protocol on. It defaults to off and is
	// written out in every format, because the guests' own defaults
	// differ (netplan and NetworkManager on; networkd and ifupdown off).
	STP *bool `yaml:"stp,omitempty" json:"stp,omitempty"`
	// ForwardDelay is the seconds a port listens and learns before it
	// forwards, with STP on (2–30).
	ForwardDelay *int `yaml:"forwardDelay,omitempty" json:"forwardDelay,omitempty"`
	// Priority is the bridge's priority in the root bridge election
	// (0–65535, lower wins).
	Priority *int `yaml:"priority,omitempty" json:"priority,omitempty"`
}

// VLAN is a tagged sub-interface of Link (a configuration ID).
type VLAN struct {
	ID        int    `yaml:"id" json:"id"`
	Link      string `yaml:"link" json:"link"`
	Interface `yaml:",inline" json:",inline"`
}
