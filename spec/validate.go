package spec

// Validate, the rules of the spec's top-level fields and the checks the
// sections share; each larger section has a file of its own
// (validate_system.go, validate_network.go, validate_cloudinit.go,
// validate_storage.go).

import (
	"fmt"
	"maps"
	"net/netip"
	"path"
	"slices"
	"strings"

	"github.com/vminit/vminit/internal/lib/lazyre"
)

var (
	tzRE      = lazyre.New(`^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$`)
	packageRE = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9+._:~=*-]*$`)
)

// Validate checks every field and returns all problems as Errors, each
// naming its field. Call Default first (Load does both).
func (in *Instance) Validate() error { return in.validate(false) }

// validate is Validate; identified says the reader identifies the
// instance without spec.metadataServer.addresses (Loader.IdentifiedByPlatform).
func (in *Instance) validate(identified bool) error {
	var c ErrorList
	validateObject(&c, in)
	s := &in.Spec
	validateIdentity(&c, s)
	for i, k := range s.SSHAuthorizedKeys {
		checkSSHKey(&c, fmt.Sprintf("spec.sshAuthorizedKeys[%d]", i), k)
	}
	validateListLengths(&c, s)
	validateUsers(&c, s.Users, s.Agent)
	validateFiles(&c, s.Files)
	validateRefs(&c, in)
	validateUnits(&c, s.Units)
	validateCommands(&c, "spec.commands", s.Commands)
	validateCommands(&c, "spec.bootCommands", s.BootCommands)
	validateMounts(&c, s.Mounts)
	validateStorage(&c, s)
	if s.Timezone != "" && (!tzRE.MatchString(s.Timezone) || strings.Contains(s.Timezone, "..")) {
		c.Add("spec.timezone", "%q is not an IANA time zone name such as \"UTC\" or \"Europe/Berlin\"", s.Timezone)
	}
	validateNTP(&c, s.NTP)
	for i, p := range s.Packages {
		if !packageRE.MatchString(p) {
			c.Add(fmt.Sprintf("spec.packages[%d]", i), "%q is not a package name (optionally name=version)", p)
		}
	}
	if s.Network != nil {
		validateNetwork(&c, s.Network)
	}
	validateCloudInit(&c, &s.CloudInit)
	if s.CloudInit.UserDataOnly {
		validateUserDataOnly(&c, in)
	}
	if s.CloudInit.NoDefaultUser {
		validateNoDefaultUser(&c, s)
	}
	switch s.Datasource {
	case "", DatasourceNoCloud, DatasourceConfigDrive:
	default:
		c.Add("spec.datasource", "%q is not a seed datasource: want %q (label cidata) or %q (label config-2)", s.Datasource, DatasourceNoCloud, DatasourceConfigDrive)
	}
	if s.Network != nil && s.CloudInit.NetworkConfig != "" {
		c.Add("spec.cloudInit.networkConfig", "set either spec.network or spec.cloudInit.networkConfig, not both")
	}
	if ms := s.MetadataServer; ms != nil {
		validateMetadataServer(&c, ms, identified)
	}
	validateAgent(&c, in)
	return c.Err()
}

// validateObject checks what makes the document an Instance: its
// apiVersion, kind and metadata.name.
func validateObject(c *ErrorList, in *Instance) {
	if in.APIVersion != APIVersion {
		c.Add("apiVersion", "is %q; want %q", in.APIVersion, APIVersion)
	}
	if in.Kind != Kind {
		c.Add("kind", "is %q; want %q", in.Kind, Kind)
	}
	name := in.Metadata.Name
	switch {
	case name == "":
		c.Add("metadata.name", "required: the instance's name (hostname and instance-id derive from it)")
	case !validDNSName(name):
		c.Add("metadata.name", "%q is not a valid name: use lowercase letters, digits, '-' and '.' (RFC 1123)", name)
	}
}

// validateIdentity checks the names the guest is known by: its hostname,
// its FQDN (which must start with the hostname) and its instance ID.
func validateIdentity(c *ErrorList, s *Spec) {
	if s.Hostname != "" && !validLabel(s.Hostname) {
		c.Add("spec.hostname", "%q is not a valid host name: one RFC 1123 label, lowercase letters, digits and '-', at most 63 characters", s.Hostname)
	}
	if s.FQDN != "" {
		first, _, _ := strings.Cut(s.FQDN, ".")
		switch {
		case !validDNSName(s.FQDN) || !strings.Contains(s.FQDN, "."):
			c.Add("spec.fqdn", "%q is not a fully qualified domain name (RFC 1123, with at least one dot)", s.FQDN)
		case s.Hostname != "" && first != s.Hostname:
			c.Add("spec.fqdn", "%q does not start with the hostname %q", s.FQDN, s.Hostname)
		}
	}
	if id := s.InstanceID; id != "" && (len(id) > 255 || strings.ContainsAny(id, " \t\r\n/\\\"'") || !printable(id)) {
		c.Add("spec.instanceID", "%q: use at most 255 printable characters without spaces, quotes or slashes", id)
	}
}

// validateListLengths holds every list of the spec to MaxListEntries.
func validateListLengths(c *ErrorList, s *Spec) {
	for _, l := range []struct {
		field string
		n     int
	}{
		{"spec.sshAuthorizedKeys", len(s.SSHAuthorizedKeys)}, {"spec.users", len(s.Users)},
		{"spec.files", len(s.Files)}, {"spec.units", len(s.Units)}, {"spec.commands", len(s.Commands)},
		{"spec.bootCommands", len(s.BootCommands)}, {"spec.mounts", len(s.Mounts)}, {"spec.packages", len(s.Packages)},
	} {
		if l.n > MaxListEntries {
			c.Add(l.field, "%d entries; the limit is %d (%s)", l.n, MaxListEntries, listAdvice)
		}
	}
}

// validateNTP checks each time server: a host name or an IP address.
func validateNTP(c *ErrorList, n *NTP) {
	if n == nil {
		return
	}
	if len(n.Servers)+len(n.Pools) == 0 {
		c.Add("spec.ntp", "names no servers or pools")
	}
	for _, l := range []struct {
		field string
		hosts []string
	}{{"spec.ntp.servers", n.Servers}, {"spec.ntp.pools", n.Pools}} {
		for i, h := range l.hosts {
			if _, err := netip.ParseAddr(h); err != nil && !validDNSName(h) {
				c.Add(fmt.Sprintf("%s[%d]", l.field, i), "%q is neither a host name nor an IP address", h)
			}
		}
	}
}

// validateAgent checks spec.agent, the deprecated label that chose it
// before, and the Ignition fields that only make sense for Ignition.
func validateAgent(c *ErrorList, in *Instance) {
	s := &in.Spec
	switch s.Agent {
	case AgentCloudInit, AgentIgnition, AgentCloudbaseInit:
	default:
		c.Add("spec.agent", "%q is not a guest agent: want %q (Ubuntu, Debian, RHEL, most cloud images), %q (Fedora CoreOS, RHCOS, Flatcar) or %q (Windows)", s.Agent, AgentCloudInit, AgentIgnition, AgentCloudbaseInit)
	}
	if l, ok := in.Metadata.Labels[LabelUserData]; ok {
		field := fmt.Sprintf("metadata.labels[%q]", LabelUserData)
		switch {
		case l != AgentCloudInit && l != AgentIgnition:
			c.Add(field, "%q is not a guest agent; this label is deprecated: set spec.agent (%q or %q) instead", l, AgentCloudInit, AgentIgnition)
		case l != s.Agent:
			c.Add(field, "says %q but spec.agent is %q; this label is deprecated: remove it", l, s.Agent)
		}
	}
	ig := &s.Ignition
	switch ig.Variant {
	case "", VariantFCOS, VariantRHCOS, VariantFlatcar:
	default:
		c.Add("spec.ignition.variant", "%q is not an Ignition guest: want %q, %q or %q", ig.Variant, VariantFCOS, VariantRHCOS, VariantFlatcar)
	}
	if v := ig.Version; v != "" && !validIgnitionVersion(v) {
		c.Add("spec.ignition.version", "%q is not an Ignition spec version such as \"3.4.0\"", v)
	}
	if t := strings.TrimSpace(ig.Config); t != "" && !strings.HasPrefix(t, "{") {
		c.Add("spec.ignition.config", "an Ignition config is a JSON object; for Butane YAML use spec.ignition.butane")
	}
	if s.Agent != AgentIgnition && *ig != (Ignition{}) {
		c.Add("spec.ignition", "is set but spec.agent is %q, so nothing would use it: set spec.agent: %s, or remove spec.ignition", s.Agent, AgentIgnition)
	}
}

// validIgnitionVersion reports whether v has the form of an Ignition spec
// version (MAJOR.MINOR.PATCH, with an optional -experimental suffix);
// whether the renderer supports it is the ignition package's question.
func validIgnitionVersion(v string) bool {
	v, _ = strings.CutSuffix(v, "-experimental")
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || len(p) > 4 || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// validateMetadataServer checks spec.metadataServer. Its addresses are
// required unless identified: where they are the only way a request
// finds its instance (a directory, etcd, the admin API), a block
// without them is a forgotten address, and would serve the instance to
// nobody, silently. Where the platform identifies the instance (a
// cluster: the VMIs naming it), the block may set its options alone.
func validateMetadataServer(c *ErrorList, ms *MetadataServer, identified bool) {
	const f = "spec.metadataServer"
	if len(ms.Addresses) == 0 && !identified {
		c.Add(f+".addresses", "required: the source addresses the instance's requests come from "+
			"(a Kubernetes Instance, which its KubeVirt VMI identifies, needs none: `vminit validate --kubernetes`)")
	}
	seen := map[netip.Addr]int{}
	for i, a := range ms.Addresses {
		af := fmt.Sprintf("%s.addresses[%d]", f, i)
		ip, err := netip.ParseAddr(a)
		if err != nil || ip.Zone() != "" {
			c.Add(af, "%q is not an IP address", a)
			continue
		}
		if j, dup := seen[ip.Unmap()]; dup {
			c.Add(af, "%s is already listed at %s.addresses[%d]", a, f, j)
		}
		if why := notASource(ip.Unmap()); why != "" {
			c.Add(af, "%s is %s, never the source of a VM's request; give the address the VM's requests come from", a, why)
		}
		seen[ip.Unmap()] = i
	}
	if ms.IMDSv2 != "" && ms.IMDSv2 != "optional" && ms.IMDSv2 != "required" {
		c.Add(f+".imdsv2", "%q: want optional or required", ms.IMDSv2)
	}
	for i, d := range ms.Dialects {
		df := fmt.Sprintf("%s.dialects[%d]", f, i)
		switch j := slices.Index(ms.Dialects, d); {
		case !slices.Contains(Dialects, d):
			c.Add(df, "%q: want one of %s", d, strings.Join(Dialects, ", "))
		case j < i:
			c.Add(df, "%s is already listed at %s.dialects[%d]", d, f, j)
		}
	}
	if ms.TokenHopLimit != 0 && (ms.TokenHopLimit < 1 || ms.TokenHopLimit > 64) {
		c.Add(f+".tokenHopLimit", "%d is out of range (1–64)", ms.TokenHopLimit)
	}
	for _, kv := range [][2]string{{"region", ms.Region}, {"availabilityZone", ms.AvailabilityZone}, {"instanceType", ms.InstanceType}} {
		if kv[1] != "" && !packageRE.MatchString(kv[1]) {
			c.Add(f+"."+kv[0], "%q: use letters, digits, '.', '-' and '_'", kv[1])
		}
	}
}

// notASource says why an address can never be a request's source address,
// or returns "". (Whether loopback sources are acceptable is the server's
// policy, not the spec's.)
func notASource(ip netip.Addr) string {
	switch {
	case ip.IsUnspecified():
		return "the unspecified address"
	case ip.IsMulticast():
		return "a multicast address"
	case ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "the broadcast address"
	}
	return ""
}

// validDNSName reports whether s is a DNS name as validLabel takes its
// labels, at most 253 characters.
func validDNSName(s string) bool {
	if len(s) > 253 {
		return false
	}
	for l := range strings.SplitSeq(s, ".") {
		if !validLabel(l) {
			return false
		}
	}
	return true
}

// validLabel reports whether s is one RFC 1123 label as Linux host names
// take it, lowercase only: [a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?. It and
// validUserName are written out rather than regular expressions because
// every spec of a 100,000-instance directory runs them at start-up
// (FuzzNameChecks holds them to the expressions).
func validLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// validUserName reports whether s is a user or group name as shadow-utils'
// default rule takes it: [a-z_][a-z0-9_-]{0,30}\$? (a trailing '$' is
// Samba's machine accounts).
func validUserName(s string) bool {
	s, _ = strings.CutSuffix(s, "$")
	if len(s) == 0 || len(s) > 31 || s[0] >= '0' && s[0] <= '9' || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// printable reports whether s holds no control character (C0 or DEL).
func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// checkPath checks a path in the guest: absolute, clean, below / and
// without a NUL or a newline.
func checkPath(c *ErrorList, field, p string) {
	switch {
	case p == "":
		c.Add(field, "required")
	case !strings.HasPrefix(p, "/"):
		c.Add(field, "%q is not absolute", p)
	case path.Clean(p) != p:
		c.Add(field, "%q is not clean; write %q", p, path.Clean(p))
	case p == "/":
		c.Add(field, "must name something below /")
	case strings.ContainsAny(p, "\x00\n\r"):
		c.Add(field, "%q contains a NUL or newline", p)
	}
}

// sortedKeys is m's keys in order, so that a map's problems are listed in
// the same order every time.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
