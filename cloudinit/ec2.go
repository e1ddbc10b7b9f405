package cloudinit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/vminit/vminit/spec"
)

// EC2File is one file of the EC2 instance metadata tree.
type EC2File struct {
	// Path is relative to a metadata version directory, e.g.
	// "meta-data/instance-id" or "dynamic/instance-identity/document". A
	// path that ends in "/" is a directory whose listing is not simply
	// the names under it: meta-data/public-keys/ lists "0=key-name".
	Path string
	Data []byte
	// Since is the first metadata version that has the file:
	// EC2Version2009 for most, EC2Version2016 for
	// meta-data/network/interfaces/macs/…, EC2Version2019 for
	// meta-data/placement/region.
	Since string
}

// The metadata versions that introduced the files of the tree.
const (
	EC2Version2009 = "2009-04-04"
	EC2Version2016 = "2016-09-02"
	EC2Version2019 = "2019-10-01"
)

// ec2Versions are the metadata versions the tree is served under, oldest
// first, "latest" last: the one list of them (EC2Versions).
var ec2Versions = [...]string{EC2Version2009, EC2Version2016, "2018-09-24", EC2Version2019, "2021-03-23", "latest"}

// ec2Since are the versions that introduced files, oldest first: each
// starts a feature level.
var ec2Since = [EC2Levels]string{EC2Version2009, EC2Version2016, EC2Version2019}

// EC2Levels is the number of feature levels: versions of one level have
// the same files, so a server keeps one tree per level.
const EC2Levels = 3

// ec2VersionLevels are the levels of ec2Versions, worked out once: EC2Level
// is on the metadata server's request path, twice per EC2 request.
var ec2VersionLevels = func() (levels [len(ec2Versions)]int) {
	for i, v := range ec2Versions {
		levels[i] = -1
		for l, s := range ec2Since {
			// The versions are dates, ordered as strings; "latest"
			// sorts after every date.
			if s <= v {
				levels[i] = l
			}
		}
	}
	return levels
}()

// EC2Versions returns the metadata versions the tree is served under (the
// metadata server's version list), oldest first, "latest" last. A version
// has the files whose Since is not after it (EC2Level).
func EC2Versions() []string { return slices.Clone(ec2Versions[:]) }

// EC2Level returns the feature level of version v, one of EC2Versions: 0
// for the 2009-04-04 tree, 1 from 2016-09-02 (network/interfaces/macs),
// 2 from 2019-10-01 (placement/region); -1 for a version not served. A
// file is in version v when EC2Level(f.Since) <= EC2Level(v).
func EC2Level(v string) int {
	for i, x := range ec2Versions {
		if x == v {
			return ec2VersionLevels[i]
		}
	}
	return -1
}

// EC2MetaData renders the EC2 instance metadata tree cloud-init's Ec2
// datasource reads (the metadata server serves it under /{version}/):
// meta-data with the instance-id, host name, placement and instance type
// (spec.metadataServer's, defaulted), the public keys, a network interface
// for each ethernet with a MAC address, and the instance identity
// document. User data is not in it. The files are sorted by Path.
func EC2MetaData(inst *spec.Instance) []EC2File {
	s := &inst.Spec
	ms := s.MetadataServerSettings()
	var files []EC2File
	add := func(since, p, v string) { files = append(files, EC2File{Path: p, Data: []byte(v), Since: since}) }
	const md = "meta-data/"
	host := hostname(s)
	add(EC2Version2009, md+"ami-id", "ami-vminit")
	add(EC2Version2009, md+"ami-launch-index", "0")
	add(EC2Version2009, md+"ami-manifest-path", "(unknown)")
	add(EC2Version2009, md+"block-device-mapping/ami", "/dev/vda")
	add(EC2Version2009, md+"block-device-mapping/root", "/dev/vda")
	add(EC2Version2009, md+"hostname", host)
	add(EC2Version2009, md+"local-hostname", host)
	add(EC2Version2009, md+"instance-action", "none")
	add(EC2Version2009, md+"instance-id", s.InstanceID)
	add(EC2Version2009, md+"instance-type", ms.InstanceType)
	add(EC2Version2009, md+"placement/availability-zone", ms.AvailabilityZone)
	add(EC2Version2019, md+"placement/region", ms.Region)
	add(EC2Version2009, md+"reservation-id", "r-"+shortHash(inst.Metadata.Name, 17))
	add(EC2Version2009, md+"security-groups", "default")
	ns := ec2NICs(s)
	ip := localIPv4(s, ns)
	if ip != "" {
		add(EC2Version2009, md+"local-ipv4", ip)
	}
	if len(ns) > 0 {
		add(EC2Version2009, md+"mac", ns[0].mac)
	}
	for _, c := range ns {
		d := md + "network/interfaces/macs/" + c.mac + "/"
		add(EC2Version2016, d+"device-number", strconv.Itoa(c.index))
		add(EC2Version2016, d+"interface-id", "eni-"+shortHash(inst.Metadata.Name+c.mac, 17))
		add(EC2Version2016, d+"mac", c.mac)
		var v4 []string
		for _, p := range c.v4 {
			v4 = append(v4, p.Addr().String())
		}
		if len(v4) == 0 && c.index == 0 && ip != "" {
			v4 = []string{ip}
		}
		if len(v4) > 0 {
			add(EC2Version2016, d+"local-ipv4s", strings.Join(v4, "\n"))
		}
		if len(c.v4) > 0 {
			add(EC2Version2016, d+"subnet-ipv4-cidr-block", c.v4[0].Masked().String())
		}
		if len(c.v6) > 0 {
			var v6 []string
			for _, p := range c.v6 {
				v6 = append(v6, p.Addr().String())
			}
			add(EC2Version2016, d+"ipv6s", strings.Join(v6, "\n"))
			add(EC2Version2016, d+"subnet-ipv6-cidr-blocks", c.v6[0].Masked().String())
		}
	}
	if keys := trimKeys(s.SSHAuthorizedKeys); len(keys) > 0 {
		names := keyNames(keys)
		lines := make([]string, len(keys))
		for i, k := range keys {
			add(EC2Version2009, md+"public-keys/"+strconv.Itoa(i)+"/openssh-key", k)
			lines[i] = strconv.Itoa(i) + "=" + names[i]
		}
		add(EC2Version2009, md+"public-keys/", strings.Join(lines, "\n"))
	}
	doc, _ := json.MarshalIndent(map[string]any{
		"accountId":        "000000000000",
		"architecture":     "x86_64",
		"availabilityZone": ms.AvailabilityZone,
		"imageId":          "ami-vminit",
		"instanceId":       s.InstanceID,
		"instanceType":     ms.InstanceType,
		"privateIp":        nilIfEmpty(ip),
		"region":           ms.Region,
		"version":          "2017-09-30",
	}, "", "  ")
	files = append(files, EC2File{Path: "dynamic/instance-identity/document", Data: doc, Since: EC2Version2009})
	slices.SortFunc(files, func(a, b EC2File) int { return strings.Compare(a.Path, b.Path) })
	return files
}

// ec2NIC is one interface as the EC2 tree shows it.
type ec2NIC struct {
	mac   string
	v4    []netip.Prefix
	v6    []netip.Prefix
	index int
}

// ec2NICs returns the spec's ethernets that have a MAC address, in the
// order of their configuration IDs.
func ec2NICs(s *spec.Spec) []ec2NIC {
	n := s.Network
	if n == nil {
		return nil
	}
	var out []ec2NIC
	for _, id := range slices.Sorted(maps.Keys(n.Ethernets)) {
		e := n.Ethernets[id]
		mac := e.MACAddress
		if e.Match != nil && e.Match.MACAddress != "" {
			mac = e.Match.MACAddress
		}
		hw, err := net.ParseMAC(mac)
		if err != nil {
			continue
		}
		c := ec2NIC{mac: hw.String(), index: len(out)}
		for _, a := range e.Addresses {
			if p, err := netip.ParsePrefix(a); err == nil {
				if p.Addr().Is4() {
					c.v4 = append(c.v4, p)
				} else {
					c.v6 = append(c.v6, p)
				}
			}
		}
		out = append(out, c)
	}
	return out
}

// localIPv4 is the spec's first static IPv4 address, else the first IPv4
// address the metadata server identifies the instance by.
func localIPv4(s *spec.Spec, ns []ec2NIC) string {
	for _, c := range ns {
		if len(c.v4) > 0 {
			return c.v4[0].Addr().String()
		}
	}
	if n := s.Network; n != nil {
		for _, id := range slices.Sorted(maps.Keys(n.Ethernets)) {
			for _, a := range n.Ethernets[id].Addresses {
				if p, err := netip.ParsePrefix(a); err == nil && p.Addr().Is4() {
					return p.Addr().String()
				}
			}
		}
	}
	if ms := s.MetadataServer; ms != nil {
		for _, a := range ms.Addresses {
			if ip, err := netip.ParseAddr(a); err == nil && ip.Unmap().Is4() {
				return ip.Unmap().String()
			}
		}
	}
	return ""
}

func shortHash(s string, n int) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])[:n]
}

// keyNames names the public keys: the key's comment when it is a plain
// unique word, else key-N.
func keyNames(keys []string) []string {
	names := make([]string, len(keys))
	seen := map[string]bool{}
	for i, k := range keys {
		f := strings.Fields(k)
		name := ""
		if len(f) >= 3 && !strings.ContainsAny(f[2], "=/") {
			name = f[2]
		}
		if name == "" || seen[name] {
			name = "key-" + strconv.Itoa(i)
		}
		seen[name] = true
		names[i] = name
	}
	return names
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
