package spec

import (
	"fmt"
	"maps"
	"net/netip"
	"path"
	"slices"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/vminit/vminit/internal/lib/lazyre"
	"github.com/vminit/vminit/internal/lib/yamlbound"
)

var (
	ownerRE    = lazyre.New(`^([a-z_][a-z0-9_-]*\$?)?(:[a-z_][a-z0-9_-]*\$?)?$`)
	cryptRE    = lazyre.New(`^\$(1|2[abxy]|5|6|y|gy|7|sha1|md5)\$[./A-Za-z0-9$=,+-]+$`)
	unitRE     = lazyre.New(`^[A-Za-z0-9:_.\\@-]+\.(service|socket|timer|mount|automount|target|path|slice|swap|device|scope)$`)
	dropinRE   = lazyre.New(`^[A-Za-z0-9:_.@-]+\.conf$`)
	tzRE       = lazyre.New(`^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$`)
	ifnameRE   = lazyre.New(`^[A-Za-z0-9_.:-]{1,15}$`)
	fstypeRE   = lazyre.New(`^[a-z0-9_.-]+$`)
	packageRE  = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9+._:~=*-]*$`)
	bondModes  = []string{"balance-rr", "active-backup", "balance-xor", "broadcast", "802.3ad", "balance-tlb", "balance-alb"}
	reservedMD = map[string]string{
		"instance-id":    "set spec.instanceID",
		"local-hostname": "set spec.hostname",
		"public-keys":    "set spec.sshAuthorizedKeys",
		// ConfigDrive's meta_data.json names for the same things.
		"uuid":         "set spec.instanceID",
		"hostname":     "set spec.hostname",
		"name":         "set metadata.name",
		"public_keys":  "set spec.sshAuthorizedKeys",
		"launch_index": "it is always 0 for a single instance; leave it out",
	}
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
	validateUsers(&c, s.Users)
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

// validateAgent checks spec.agent, the deprecated label that chose it
// before, and the Ignition fields that only make sense for Ignition.
func validateAgent(c *ErrorList, in *Instance) {
	s := &in.Spec
	switch s.Agent {
	case AgentCloudInit, AgentIgnition:
	default:
		c.Add("spec.agent", "%q is not a guest agent: want %q (Ubuntu, Debian, RHEL, most cloud images) or %q (Fedora CoreOS, RHCOS, Flatcar)", s.Agent, AgentCloudInit, AgentIgnition)
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
	if s.Agent == AgentCloudInit && *ig != (Ignition{}) {
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

func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

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

func validateUsers(c *ErrorList, users []User) {
	seen := map[string]int{}
	for i, u := range users {
		f := fmt.Sprintf("spec.users[%d]", i)
		switch {
		case u.Name == "":
			c.Add(f+".name", "required")
		case !validUserName(u.Name):
			c.Add(f+".name", "%q is not a valid user name: lowercase letters, digits, '_' and '-', starting with a letter or '_', at most 32 characters", u.Name)
		}
		if j, dup := seen[u.Name]; dup && u.Name != "" {
			c.Add(f+".name", "user %q is already defined at spec.users[%d]", u.Name, j)
		} else {
			seen[u.Name] = i
		}
		if u.PrimaryGroup != "" && !validUserName(u.PrimaryGroup) {
			c.Add(f+".primaryGroup", "%q is not a valid group name", u.PrimaryGroup)
		}
		for j, g := range u.Groups {
			if !validUserName(g) {
				c.Add(fmt.Sprintf("%s.groups[%d]", f, j), "%q is not a valid group name", g)
			}
		}
		if u.Shell != "" {
			checkPath(c, f+".shell", u.Shell)
		}
		if u.HomeDir != "" {
			checkPath(c, f+".homeDir", u.HomeDir)
		}
		if strings.ContainsAny(u.Sudo, "\n\r") {
			c.Add(f+".sudo", "one sudoers rule on one line, e.g. \"ALL=(ALL) NOPASSWD:ALL\"")
		}
		if strings.ContainsAny(u.Gecos, ":\n") {
			c.Add(f+".gecos", "may not contain ':' or a newline (it is a passwd field)")
		}
		if u.Password != "" {
			c.Add(f+".password", "plain-text passwords are refused (they would sit readable on the seed): put a crypt hash in passwordHash, e.g. from `mkpasswd -m sha-512`")
		}
		if u.PasswordHash != "" && !cryptRE.MatchString(u.PasswordHash) {
			c.Add(f+fromField(".passwordHash", u.PasswordHashFrom), "not a crypt(3) hash such as \"$6$salt$…\" (generate one with `mkpasswd -m sha-512`)")
		}
		for j, k := range u.SSHAuthorizedKeys {
			checkSSHKey(c, fmt.Sprintf("%s.sshAuthorizedKeys[%d]", f, j), k)
		}
	}
}

func validateFiles(c *ErrorList, files []File) {
	claims := PathClaims{}
	for i, fl := range files {
		f := fmt.Sprintf("spec.files[%d]", i)
		checkPath(c, f+".path", fl.Path)
		if fl.Path != "" {
			claims.Claim(c, fl.Path, f+".path")
		}
		n := 0
		if fl.Content != nil {
			n++
		}
		if fl.ContentBase64 != "" {
			n++
		}
		if fl.Source != nil {
			n++ // validateRefs checks it
		}
		if n > 1 {
			c.Add(f, "set only one of content, contentBase64 and source")
		}
		if fl.Owner != "" && !ownerRE.MatchString(fl.Owner) {
			c.Add(f+".owner", "%q: want \"user\", \"user:group\" or \":group\" by name (cloud-init looks owners up by name, so numeric IDs cannot work)", fl.Owner)
		}
	}
}

func validateUnits(c *ErrorList, units []Unit) {
	seen := map[string]int{}
	for i, u := range units {
		f := fmt.Sprintf("spec.units[%d]", i)
		if !unitRE.MatchString(u.Name) {
			c.Add(f+".name", "%q is not a systemd unit name with its type suffix, e.g. \"app.service\"", u.Name)
		}
		if j, dup := seen[u.Name]; dup {
			c.Add(f+".name", "unit %q is already defined at spec.units[%d]", u.Name, j)
		} else {
			seen[u.Name] = i
		}
		if u.Content == "" && len(u.Dropins) == 0 && u.Enabled == nil {
			c.Add(f, "nothing to do: give content, dropins or enabled")
		}
		checkUnitSyntax(c, f+".content", u.Content)
		dseen := map[string]bool{}
		for j, d := range u.Dropins {
			df := fmt.Sprintf("%s.dropins[%d]", f, j)
			if !dropinRE.MatchString(d.Name) {
				c.Add(df+".name", "%q: a drop-in name ends in .conf", d.Name)
			}
			if dseen[d.Name] {
				c.Add(df+".name", "drop-in %q is given twice", d.Name)
			}
			checkUnitSyntax(c, df+".content", d.Content)
			dseen[d.Name] = true
		}
	}
}

// checkUnitSyntax reports unit file text that systemd (and Ignition's
// validator, which uses the same go-systemd parser) cannot read: an
// unterminated section header, a line outside any section.
func checkUnitSyntax(c *ErrorList, field, content string) {
	if content == "" {
		return
	}
	if _, err := unit.DeserializeOptions(strings.NewReader(content)); err != nil {
		c.Add(field, "not a systemd unit file: %v", err)
	}
}

func validateCommands(c *ErrorList, field string, cmds []Command) {
	for i, cmd := range cmds {
		f := fmt.Sprintf("%s[%d]", field, i)
		if cmd.Argv == nil && strings.TrimSpace(cmd.Shell) == "" {
			c.Add(f, "empty command")
		}
		if cmd.Argv != nil && (len(cmd.Argv) == 0 || cmd.Argv[0] == "") {
			c.Add(f, "an argument list needs a program as its first element")
		}
	}
}

func validateMounts(c *ErrorList, mounts []Mount) {
	seen := map[string]int{}
	for i, m := range mounts {
		f := fmt.Sprintf("spec.mounts[%d]", i)
		if m.Device == "" || strings.ContainsAny(m.Device, " \t\n") {
			c.Add(f+".device", "required, without whitespace (a device path, LABEL=…, UUID=… or server:/export)")
		}
		checkPath(c, f+".path", m.Path)
		if j, dup := seen[m.Path]; dup && m.Path != "" {
			c.Add(f+".path", "%q is already mounted by spec.mounts[%d]", m.Path, j)
		} else {
			seen[m.Path] = i
		}
		if m.Type != "" && !fstypeRE.MatchString(m.Type) {
			c.Add(f+".type", "%q is not a filesystem type", m.Type)
		}
		for j, o := range m.Options {
			if o == "" || strings.ContainsAny(o, ", \t\n") {
				c.Add(fmt.Sprintf("%s.options[%d]", f, j), "%q: one option per entry, without commas or whitespace", o)
			}
		}
	}
}

func validateCloudInit(c *ErrorList, ci *CloudInit) {
	checkCloudConfig := func(field, data string) {
		if !isCloudConfig(data) {
			return
		}
		var v any
		if err := yamlbound.Unmarshal([]byte(data), &v, FieldYAML); err != nil {
			c.Add(field, "#cloud-config %s", yamlbound.Describe(err, "is not valid YAML"))
			return
		}
		if _, ok := v.(map[string]any); !ok && v != nil {
			c.Add(field, "#cloud-config must be a mapping of module keys")
		}
	}
	checkCloudConfig("spec.cloudInit"+fromField(".userData", ci.UserDataFrom), ci.UserData)
	checkCloudConfig("spec.cloudInit.vendorData", ci.VendorData)
	if nc := ci.NetworkConfig; nc != "" {
		var v any
		if err := yamlbound.Unmarshal([]byte(nc), &v, FieldYAML); err != nil {
			c.Add("spec.cloudInit.networkConfig", "%s", yamlbound.Describe(err, "is not valid YAML or JSON"))
		} else if _, ok := v.(map[string]any); !ok {
			c.Add("spec.cloudInit.networkConfig", "must be a mapping: network-config version 1 or 2, or network_data.json")
		}
	}
	for _, k := range sortedKeys(ci.MetaData) {
		if hint, ok := reservedMD[k]; ok {
			c.Add("spec.cloudInit.metaData."+k, "generated from the spec: %s instead", hint)
		}
	}
}

// validateUserDataOnly refuses the fields only the generated #cloud-config
// carries, which spec.cloudInit.userDataOnly leaves out.
func validateUserDataOnly(c *ErrorList, in *Instance) {
	s := &in.Spec
	if s.Agent == AgentIgnition {
		c.Add("spec.cloudInit.userDataOnly", "is for cloud-init guests; an Ignition guest reads no user-data")
		return
	}
	for _, f := range []struct {
		field string
		set   bool
	}{
		{"spec.fqdn", s.FQDN != ""}, {"spec.users", len(s.Users) > 0}, {"spec.files", len(s.Files) > 0},
		{"spec.units", len(s.Units) > 0}, {"spec.mounts", len(s.Mounts) > 0}, {"spec.timezone", s.Timezone != ""},
		{"spec.packages", len(s.Packages) > 0}, {"spec.commands", len(s.Commands) > 0}, {"spec.bootCommands", len(s.BootCommands) > 0},
		{"spec.storage", s.Storage != nil}, {"spec.sshHostKeys", s.SSHHostKeys != nil},
	} {
		if f.set {
			c.Add(f.field, "goes into the generated #cloud-config, which spec.cloudInit.userDataOnly leaves out: remove one of them (or put this in spec.cloudInit.userData)")
		}
	}
}

// validateNoDefaultUser refuses what spec.cloudInit.noDefaultUser cannot
// do: without spec.users no users key is generated, and cloud-init's own
// configuration then creates the default user anyway; the meta-data keys
// of spec.sshAuthorizedKeys would have no user to go to.
func validateNoDefaultUser(c *ErrorList, s *Spec) {
	const f = "spec.cloudInit.noDefaultUser"
	switch {
	case s.Agent == AgentIgnition:
		c.Add(f, "is for cloud-init guests; an Ignition guest always has its core user")
	case len(s.Users) == 0:
		c.Add(f, "needs spec.users: without them cloud-init's own configuration creates the default user")
	case len(s.SSHAuthorizedKeys) > 0 || s.SSHAuthorizedKeysFrom != nil:
		c.Add(fromField("spec.sshAuthorizedKeys", s.SSHAuthorizedKeysFrom), "go to the image's default user, which spec.cloudInit.noDefaultUser leaves out: give them to a user of spec.users")
	}
}

// validateNetwork checks spec.network in the order a reader of the
// document would: the configuration IDs, then each kind of interface (the
// later kinds refer to the earlier ones by ID), then the VLANs whose link
// became a bridge port. Each step adds its problems to c in that order.
func validateNetwork(c *ErrorList, n *Network) {
	ids := networkIDs(c, n)
	validateEthernets(c, n)
	inBond := validateBonds(c, n)
	validateVLANs(c, n, ids)
	inBridge := validateBridges(c, n, ids, inBond)
	for _, id := range sortedKeys(n.VLANs) {
		if v := n.VLANs[id]; inBridge[v.Link] != "" && v.Link != "" && ids[v.Link] != "bridges" {
			c.Add("spec.network.vlans."+id+".link", "%q is a port of bridge %q; put the VLAN on the bridge instead", v.Link, inBridge[v.Link])
		}
	}
}

// networkIDs maps every configuration ID to its kind ("ethernets",
// "bonds", "vlans", "bridges"): one namespace for all four, as in netplan,
// so an ID used twice is an error at its second use.
func networkIDs(c *ErrorList, n *Network) map[string]string {
	ids := map[string]string{}
	claim := func(kind string, keys []string) {
		for _, id := range keys {
			if prev, dup := ids[id]; dup {
				c.Add("spec.network."+kind+"."+id, "configuration ID %q is also used under %s", id, prev)
			}
			ids[id] = kind
		}
	}
	claim("ethernets", sortedKeys(n.Ethernets))
	claim("bonds", sortedKeys(n.Bonds))
	claim("vlans", sortedKeys(n.VLANs))
	claim("bridges", sortedKeys(n.Bridges))
	return ids
}

// validateEthernets checks how each NIC is found (match, or its ID as the
// interface name), that no two match one MAC address, and its renaming.
func validateEthernets(c *ErrorList, n *Network) {
	macs := map[string]string{}
	for _, id := range sortedKeys(n.Ethernets) {
		e := n.Ethernets[id]
		f := "spec.network.ethernets." + id
		if e.Match != nil {
			if e.Match.MACAddress == "" && e.Match.Name == "" {
				c.Add(f+".match", "give macAddress or name")
			}
			if e.Match.MACAddress != "" {
				if mac, ok := checkMAC(c, f+".match.macAddress", e.Match.MACAddress); ok {
					if other, dup := macs[mac]; dup {
						c.Add(f+".match.macAddress", "%s is also matched by %s", mac, other)
					}
					macs[mac] = f
				}
			}
		} else {
			if !ifnameRE.MatchString(id) {
				c.Add(f, "without match, the ID is the interface name, and %q is not one (at most 15 characters); add match.macAddress or match.name", id)
			}
			if e.SetName != "" {
				c.Add(f+".setName", "needs match: only a matched interface can be renamed")
			}
		}
		if e.SetName != "" && !ifnameRE.MatchString(e.SetName) {
			c.Add(f+".setName", "%q is not an interface name (at most 15 characters)", e.SetName)
		}
		validateInterface(c, f, &e.Interface)
	}
}

// validateBonds checks each bond and its members, and returns which bond
// each ethernet belongs to (a bridge may not take a bond's member).
func validateBonds(c *ErrorList, n *Network) (inBond map[string]string) {
	inBond = map[string]string{}
	for _, id := range sortedKeys(n.Bonds) {
		b := n.Bonds[id]
		f := "spec.network.bonds." + id
		checkIfname(c, f, id)
		if len(b.Interfaces) == 0 {
			c.Add(f+".interfaces", "required: the ethernets IDs this bond aggregates")
		}
		for i, m := range b.Interfaces {
			mf := fmt.Sprintf("%s.interfaces[%d]", f, i)
			eth, ok := n.Ethernets[m]
			switch {
			case !ok:
				c.Add(mf, "%q is not defined under spec.network.ethernets", m)
			case inBond[m] != "":
				c.Add(mf, "%q is already a member of bond %q", m, inBond[m])
			case eth.DHCP4 || eth.DHCP6 || len(eth.Addresses) > 0:
				c.Add(mf, "%q has its own addresses or DHCP; configure them on the bond", m)
			}
			inBond[m] = id
		}
		if p := b.Parameters; p != nil && p.Mode != "" && !slices.Contains(bondModes, p.Mode) {
			c.Add(f+".parameters.mode", "%q is not a bonding mode (one of %s)", p.Mode, strings.Join(bondModes, ", "))
		}
		validateInterface(c, f, &b.Interface)
	}
	return inBond
}

// validateVLANs checks each VLAN's ID and that its link is an interface
// the spec defines (ids, from networkIDs).
func validateVLANs(c *ErrorList, n *Network, ids map[string]string) {
	for _, id := range sortedKeys(n.VLANs) {
		v := n.VLANs[id]
		f := "spec.network.vlans." + id
		checkIfname(c, f, id)
		if v.ID < 1 || v.ID > 4094 {
			c.Add(f+".id", "%d is not a VLAN ID (1–4094)", v.ID)
		}
		if _, ok := ids[v.Link]; !ok || v.Link == id {
			c.Add(f+".link", "%q is not an ethernet, bond or bridge defined in spec.network", v.Link)
		}
		validateInterface(c, f, &v.Interface)
	}
}

// validateBridges checks each bridge, its ports and its STP parameters,
// and returns which bridge each port belongs to.
func validateBridges(c *ErrorList, n *Network, ids, inBond map[string]string) (inBridge map[string]string) {
	inBridge = map[string]string{}
	for _, id := range sortedKeys(n.Bridges) {
		b := n.Bridges[id]
		f := "spec.network.bridges." + id
		checkIfname(c, f, id)
		for i, m := range b.Interfaces {
			mf := fmt.Sprintf("%s.interfaces[%d]", f, i)
			in := bridgePort(n, ids[m], m)
			switch {
			case in == nil:
				c.Add(mf, "%q is not an ethernet, bond or VLAN defined in spec.network", m)
				continue
			case inBridge[m] != "":
				c.Add(mf, "%q is already a port of bridge %q", m, inBridge[m])
				continue
			case inBond[m] != "":
				c.Add(mf, "%q is a member of bond %q; add the bond to the bridge instead", m, inBond[m])
			case in.DHCP4 || in.DHCP6 || len(in.Addresses) > 0:
				c.Add(mf, "%q has its own addresses or DHCP; configure them on the bridge", m)
			}
			inBridge[m] = id
		}
		if p := b.Parameters; p != nil {
			if d := p.ForwardDelay; d != nil && (*d < 2 || *d > 30) {
				c.Add(f+".parameters.forwardDelay", "%d is not a forward delay in seconds (2–30)", *d)
			}
			if pr := p.Priority; pr != nil && (*pr < 0 || *pr > 65535) {
				c.Add(f+".parameters.priority", "%d is not a bridge priority (0–65535)", *pr)
			}
		}
		validateInterface(c, f, &b.Interface)
	}
	return inBridge
}

// bridgePort is the interface settings of a bridge's port id, of kind
// (from networkIDs), or nil when a bridge cannot take it (undefined, or
// another bridge).
func bridgePort(n *Network, kind, id string) *Interface {
	switch kind {
	case "ethernets":
		e := n.Ethernets[id]
		return &e.Interface
	case "bonds":
		b := n.Bonds[id]
		return &b.Interface
	case "vlans":
		v := n.VLANs[id]
		return &v.Interface
	}
	return nil
}

// checkIfname checks that a bond's, VLAN's or bridge's ID, which is the
// interface the guest creates, is an interface name.
func checkIfname(c *ErrorList, f, id string) {
	if !ifnameRE.MatchString(id) {
		c.Add(f, "%q is not an interface name (at most 15 characters)", id)
	}
}

func validateInterface(c *ErrorList, f string, in *Interface) {
	for i, a := range in.Addresses {
		if _, err := netip.ParsePrefix(a); err != nil {
			c.Add(fmt.Sprintf("%s.addresses[%d]", f, i), "%q is not an address in CIDR form such as 192.0.2.10/24", a)
		}
	}
	checkGW := func(field, gw string, v4 bool) {
		if gw == "" {
			return
		}
		a, err := netip.ParseAddr(gw)
		if err != nil || a.Is4() != v4 {
			fam := "IPv6"
			if v4 {
				fam = "IPv4"
			}
			c.Add(field, "%q is not an %s address", gw, fam)
		}
	}
	checkGW(f+".gateway4", in.Gateway4, true)
	checkGW(f+".gateway6", in.Gateway6, false)
	for i, r := range in.Routes {
		rf := fmt.Sprintf("%s.routes[%d]", f, i)
		var to netip.Prefix
		switch {
		case r.To == "default":
		case r.To == "":
			c.Add(rf+".to", "required: a CIDR or \"default\"")
		default:
			var err error
			if to, err = netip.ParsePrefix(r.To); err != nil {
				c.Add(rf+".to", "%q is not a CIDR or \"default\"", r.To)
			}
		}
		if r.Via != "" {
			via, err := netip.ParseAddr(r.Via)
			if err != nil {
				c.Add(rf+".via", "%q is not an IP address", r.Via)
			} else if to.IsValid() && via.Is4() != to.Addr().Is4() {
				c.Add(rf+".via", "%s and %s are of different address families", r.Via, r.To)
			}
		} else if r.To == "default" {
			c.Add(rf+".via", "required for a default route")
		}
		if r.Metric != nil && *r.Metric < 0 {
			c.Add(rf+".metric", "must not be negative")
		}
	}
	if ns := in.Nameservers; ns != nil {
		for i, a := range ns.Addresses {
			if _, err := netip.ParseAddr(a); err != nil {
				c.Add(fmt.Sprintf("%s.nameservers.addresses[%d]", f, i), "%q is not an IP address", a)
			}
		}
		for i, d := range ns.Search {
			if !validDNSName(strings.TrimSuffix(d, ".")) {
				c.Add(fmt.Sprintf("%s.nameservers.search[%d]", f, i), "%q is not a domain name", d)
			}
		}
	}
	if in.MTU != 0 && (in.MTU < 68 || in.MTU > 65535) {
		c.Add(f+".mtu", "%d is out of range (68–65535)", in.MTU)
	}
	if in.MACAddress != "" {
		checkMAC(c, f+".macAddress", in.MACAddress)
	}
}

// reMAC is the one form of a MAC address every consumer of a spec reads:
// six colon-separated octets. netplan takes no other, and QEMU no dotted
// form; Go's net.ParseMAC would also let 5254.0012.3456 and
// 52-54-00-12-34-56 through, to fail in the guest or in QEMU.
var reMAC = lazyre.New(`^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$`)

// checkMAC validates a 48-bit MAC address and returns it in canonical
// lowercase colon form.
func checkMAC(c *ErrorList, field, s string) (string, bool) {
	if !reMAC.MatchString(s) {
		c.Add(field, "%q is not a MAC address in the colon form netplan and QEMU read, such as 52:54:00:12:34:56", s)
		return "", false
	}
	return strings.ToLower(s), true
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

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

// isCloudConfig reports whether user-data is a #cloud-config document the
// way cloud-init decides it: after leading whitespace, case-insensitively,
// by the longest matching prefix (#cloud-config-archive and
// #cloud-config-jsonp are other part types).
func isCloudConfig(data string) bool {
	lc := strings.ToLower(strings.TrimLeft(data, " \t\r\n"))
	if strings.HasPrefix(lc, "#cloud-config-archive") || strings.HasPrefix(lc, "#cloud-config-jsonp") {
		return false
	}
	return strings.HasPrefix(lc, "#cloud-config")
}
