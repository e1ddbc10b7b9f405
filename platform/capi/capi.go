// Package capi reads Cluster API's kubeadm bootstrap objects, KubeadmConfig
// and KubeadmConfigTemplate (bootstrap.cluster.x-k8s.io), and the
// kubeadmConfigSpec of KubeadmControlPlane and KubeadmControlPlaneTemplate
// (controlplane.cluster.x-k8s.io), v1beta2 and v1beta1 (converted by
// Cluster API's own conversion), decoded strictly with
// sigs.k8s.io/cluster-api/api's types, and gives one machine
// (Options.Machine names it: identity.go) what Cluster API's kubeadm
// bootstrap provider would, minus its bugs:
//
//   - files (content with encoding base64, gzip or gzip+base64, or
//     contentFrom a Secret key), owners, permissions and append;
//   - the kubeadm configuration where CAPI writes it
//     (/run/kubeadm/kubeadm.yaml to init, /run/kubeadm/kubeadm-join-config.yaml
//     to join; /etc/kubeadm.yml for Ignition), as kubeadm.k8s.io/v1beta4
//     documents for Options.KubernetesVersion (a KubeadmControlPlane's
//     spec.version); init or join as CABPK and KCP decide (join.go), a
//     join's discovery completed as CABPK completes it;
//   - preKubeadmCommands, the kubeadm command and the sentinel file CAPI
//     waits for (/run/cluster-api/bootstrap-success.complete), then
//     postKubeadmCommands; bootCommands on every boot;
//   - users (passwd or passwdFrom a Secret), ntp, mounts (as systemd mount
//     units, which unlike cloud-init 22.4's mounts module mount LABEL= and
//     UUID= devices), diskSetup (spec.storage where all of it fits the
//     spec, specStorage; else cloud-init's disk_setup and fs_setup as
//     CABPK writes them; for format ignition Ignition's storage.disks and
//     storage.filesystems,
//     as CAPI's Ignition templates write them, with mounts naming a file
//     system by its label);
//   - format ignition: an Ignition config for Flatcar at the lowest spec 3
//     version that holds it (CAPI emits spec 2.3: build with
//     --ignition-version 2.3.0 for that), kubeadm run as CAPI's Ignition
//     runs it (kubeadm.service runs /etc/kubeadm.sh: ignition.go), with
//     ignition.containerLinuxConfig.additionalConfig merged by Ignition's
//     rules: a Butane document (with variant and version), or a Container
//     Linux Config translated key by key into Butane's flatcar variant,
//     its successor (clc.go; what has no translation is an error naming
//     the key and its line).
//
// CAPI writes cloud-config with text templates and a "## template: jinja"
// header: a user name, gecos or password containing YAML syntax breaks the
// document, and "{{" in any file is evaluated by cloud-init's Jinja; vminit
// writes YAML with a real encoder, and the Jinja header only for an object
// that reads cloud-init's instance data with Jinja (jinja.go), whose texts
// must then parse. Every difference is listed in docs/platforms/capi.md.
package capi

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	ign30 "github.com/coreos/ignition/v2/config/v3_0/types"
	"github.com/google/uuid"
	"gopkg.in/yaml.v3"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	kyaml "sigs.k8s.io/yaml"

	"github.com/vminit/vminit/internal/lib/gzipbound"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/spec"
)

// DefaultKubernetesVersion is the version the kubeadm configuration is
// written for when Options.KubernetesVersion is empty.
const DefaultKubernetesVersion = "v1.36.3"

// Paths and commands as Cluster API's kubeadm bootstrap provider writes them.
const (
	InitConfigPath     = "/run/kubeadm/kubeadm.yaml"
	JoinConfigPath     = "/run/kubeadm/kubeadm-join-config.yaml"
	IgnitionConfigPath = "/etc/kubeadm.yml"
	SentinelFile       = "/run/cluster-api/bootstrap-success.complete"
	placeholderFile    = "/run/cluster-api/placeholder"
	placeholderText    = "This placeholder file is used to create the /run/cluster-api sub directory in a way that is compatible with both Linux and Windows (mkdir -p /run/cluster-api does not work with Windows)"
	kubeadmAPIVersion  = "kubeadm.k8s.io/v1beta4"
)

// Convert converts a KubeadmConfig, KubeadmConfigTemplate,
// KubeadmControlPlane or KubeadmControlPlaneTemplate: one machine's data
// (identity.go names the machine, join.go decides whether it inits or
// joins, jinja.go keeps CABPK's Jinja header when the object needs it).
func Convert(ctx context.Context, doc *platform.Document, opts platform.Options) (*platform.Result, error) {
	src, err := read(doc)
	if err != nil {
		return nil, err
	}
	ns := opts.NamespaceOf(src.ns)
	b := platform.NewBuilder(doc, src.name)
	c := &conv{ctx: ctx, b: b, ns: ns, opts: opts, src: src, cs: &src.spec, path: src.path}
	c.identity()
	c.convert()
	c.unreadMachine()
	c.jinja()
	object := fmt.Sprintf("Cluster API %s %s/%s", doc.Kind, ns, src.name)
	res, err := b.Finish(object)
	if err != nil || !c.templated {
		return res, err
	}
	return c.withJinjaHeader(res, object)
}

type conv struct {
	ctx      context.Context
	b        *platform.Builder
	ns       string
	opts     platform.Options
	src      *source
	cs       *bootstrapv1.KubeadmConfigSpec
	path     string
	ignition bool
	// templated: the user data is CABPK's Jinja template (jinja.go).
	templated bool
	userDoc   map[string]any // cloud-config keys the spec has no field for
	// machine is a KubeadmConfig's Machine (ownMachine), once looked for;
	// noRole: the machine's role, or its cluster's state, is unsaid (an
	// empty KubeadmConfig) or refused (join.go, an error added): no
	// kubeadm command is built.
	machine     *platform.Machine
	machineDone bool
	// machineErr: the cluster could not be asked for the Machine
	// (ownMachine); machineErrSaid: it has been reported.
	machineErr     error
	machineErrSaid bool
	noRole         bool
	// cluster is a KubeadmConfig's Cluster (ownCluster), once looked
	// for; clusterErr: the cluster could not give it.
	cluster     *platform.Cluster
	clusterDone bool
	clusterErr  error
}

func (c *conv) convert() {
	cs := c.cs
	s := &c.b.Instance.Spec
	switch cs.Format {
	case "", bootstrapv1.CloudConfig:
		if cs.Ignition.IsDefined() {
			c.b.Errorf(c.path+".ignition", "set with format %q: the ignition options apply only to format: ignition (Cluster API refuses this object)", cmpOr(string(cs.Format), "cloud-config"))
			return
		}
	case bootstrapv1.Ignition:
		c.ignition = true
		s.Agent = spec.AgentIgnition
		s.Ignition.Variant = spec.VariantFlatcar
		// On a seed disk, config-2: what Ignition's openstack and kubevirt
		// platforms read, and what Cluster API's KubeVirt provider attaches.
		s.Datasource = spec.DatasourceConfigDrive
	default:
		c.b.Errorf(c.path+".format", "%q: want cloud-config or ignition (Cluster API refuses this object)", cs.Format)
		return
	}
	c.files()
	c.kubeadm()
	c.users()
	c.ntp()
	c.mounts()
	c.diskSetup()
	for i, cmd := range cs.BootCommands {
		s.BootCommands = append(s.BootCommands, spec.Command{Shell: cmd})
		c.b.From(fmt.Sprintf("spec.bootCommands[%d]", i), fmt.Sprintf("%s.bootCommands[%d]", c.path, i))
	}
	if c.ignition {
		c.additionalConfig()
	}
	if len(c.userDoc) > 0 {
		doc, err := yaml.Marshal(c.userDoc)
		if err != nil {
			c.b.Errorf(c.path, "%v", err)
			return
		}
		s.CloudInit.UserData = "#cloud-config\n" + string(doc)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (c *conv) addFile(f spec.File, from string) {
	s := &c.b.Instance.Spec
	for _, g := range s.Files {
		if g.Path == f.Path {
			c.b.Errorf(from, "writes %s, which another file already writes", f.Path)
			return
		}
	}
	c.b.From(fmt.Sprintf("spec.files[%d]", len(s.Files)), from)
	s.Files = append(s.Files, f)
}

func textFile(path string, mode spec.Mode, owner string, data []byte) spec.File {
	m := mode
	f := spec.File{Path: path, Mode: &m, Owner: owner}
	if utf8Text(data) {
		t := string(data)
		f.Content = &t
	} else {
		f.ContentBase64 = base64.StdEncoding.EncodeToString(data)
	}
	return f
}

func utf8Text(data []byte) bool {
	for _, r := range string(data) {
		if r == 0xfffd || r < 0x20 && r != '\n' && r != '\t' {
			return false
		}
	}
	return true
}

func (c *conv) files() {
	for i, f := range c.cs.Files {
		p := fmt.Sprintf("%s.files[%d]", c.path, i)
		if f.ContentFormat == bootstrapv1.FileContentFormatTemplate {
			c.b.Err(p+".contentFormat", fmt.Errorf("%w: Template content is rendered by Cluster API's controller with the Machine's and Cluster's data, which vminit does not have", platform.ErrUnsupported))
			continue
		}
		data := []byte(f.Content)
		if sec := f.ContentFrom.Secret; sec.Name != "" || sec.Key != "" {
			if f.Content != "" {
				c.b.Errorf(p, "sets both content and contentFrom: give one (Cluster API refuses this object)")
				continue
			}
			v, err := platform.FetchKey(c.ctx, c.opts.Resolver, "secret", c.ns, sec.Name, sec.Key)
			if err != nil {
				c.b.Err(p+".contentFrom.secret."+refField(err), err)
				continue
			}
			data = v
		}
		data, err := decode(data, f.Encoding)
		if err != nil {
			c.b.Errorf(p+".encoding", "%v", err)
			continue
		}
		mode := spec.Mode(0o644)
		if f.Permissions != "" {
			m, err := strconv.ParseUint(f.Permissions, 8, 32)
			if err != nil || m > 0o7777 {
				c.b.Errorf(p+".permissions", "%q: want an octal mode such as 0640", f.Permissions)
				continue
			}
			mode = spec.Mode(m)
		}
		sf := textFile(f.Path, mode, f.Owner, data)
		if f.Append != nil && *f.Append {
			sf.Append = true
		}
		c.addFile(sf, p)
	}
}

// refField is the field of a Secret reference that err is about: its key
// when the Secret lacks it, else its name.
func refField(err error) string {
	if errors.Is(err, platform.ErrMissingKey) {
		return "key"
	}
	return "name"
}

func decode(data []byte, enc bootstrapv1.Encoding) ([]byte, error) {
	switch enc {
	case "":
		return data, nil
	case bootstrapv1.Base64:
		return base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	case bootstrapv1.Gzip, bootstrapv1.GzipBase64:
		if enc == bootstrapv1.GzipBase64 {
			d, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
			if err != nil {
				return nil, fmt.Errorf("not base64: %v", err)
			}
			data = d
		}
		return gzipbound.Decompress(data, 64<<20)
	}
	return nil, fmt.Errorf("%q: want base64, gzip or gzip+base64", enc)
}

// kubeadm writes the kubeadm configuration and the kubeadm command between
// the pre and post commands.
func (c *conv) kubeadm() {
	cs := c.cs
	s := &c.b.Instance.Spec
	version := cmp.Or(c.opts.KubernetesVersion, c.src.version, DefaultKubernetesVersion)
	initMode := c.initializes()
	if c.noRole {
		return
	}
	var docs []map[string]any
	var cmd, cfgPath string
	verbosity := ""
	if cs.Verbosity != nil {
		verbosity = fmt.Sprintf(" --v %d", *cs.Verbosity)
	}
	switch {
	case initMode:
		cc := c.kubeadmDoc(cs.ClusterConfiguration, "ClusterConfiguration", c.path+".clusterConfiguration")
		if cc != nil {
			cc["kubernetesVersion"] = version
			renameDays(cc)
		}
		ic := c.kubeadmDoc(cs.InitConfiguration, "InitConfiguration", c.path+".initConfiguration")
		docs = []map[string]any{cc, ic}
		cfgPath = InitConfigPath
		cmd = "kubeadm init --config " + InitConfigPath + verbosity
	default:
		if !c.joinDefaults() {
			return
		}
		docs = []map[string]any{c.kubeadmDoc(cs.JoinConfiguration, "JoinConfiguration", c.path+".joinConfiguration")}
		cfgPath = JoinConfigPath
		cmd = "kubeadm join --config " + JoinConfigPath + verbosity
	}
	if c.ignition {
		cfgPath = IgnitionConfigPath
		cmd = strings.Replace(cmd, InitConfigPath, IgnitionConfigPath, 1)
		cmd = strings.Replace(cmd, JoinConfigPath, IgnitionConfigPath, 1)
	}
	var text strings.Builder
	for _, d := range docs {
		if d == nil {
			continue
		}
		out, err := kyaml.Marshal(d)
		if err != nil {
			c.b.Errorf(c.path, "%v", err)
			return
		}
		text.WriteString("---\n")
		text.Write(out)
	}
	if c.ignition {
		c.kubeadmService(text.String(), cmd)
		return
	}
	c.addFile(textFile(cfgPath, 0o640, "root:root", []byte(text.String())), c.path)
	c.addFile(textFile(placeholderFile, 0o640, "root:root", []byte(placeholderText)), c.path)
	for i, pc := range cs.PreKubeadmCommands {
		c.b.From(fmt.Sprintf("spec.commands[%d]", len(s.Commands)), fmt.Sprintf("%s.preKubeadmCommands[%d]", c.path, i))
		s.Commands = append(s.Commands, spec.Command{Shell: pc})
	}
	s.Commands = append(s.Commands, spec.Command{Shell: cmd + " && echo success > " + SentinelFile})
	for i, pc := range cs.PostKubeadmCommands {
		c.b.From(fmt.Sprintf("spec.commands[%d]", len(s.Commands)), fmt.Sprintf("%s.postKubeadmCommands[%d]", c.path, i))
		s.Commands = append(s.Commands, spec.Command{Shell: pc})
	}
}

func isZero(v any) bool {
	b, _ := json.Marshal(v)
	return string(b) == "{}" || string(b) == "null"
}

// kubeadmDoc is one of CAPI's configurations as a kubeadm document: Cluster
// API's v1beta2 types follow kubeadm's v1beta4 field for field.
func (c *conv) kubeadmDoc(v any, kind, path string) map[string]any {
	raw, err := json.Marshal(v)
	if err != nil {
		c.b.Errorf(path, "%v", err)
		return nil
	}
	m := map[string]any{}
	if err := json.Unmarshal(raw, &m); err != nil {
		c.b.Errorf(path, "%v", err)
		return nil
	}
	m["apiVersion"] = kubeadmAPIVersion
	m["kind"] = kind
	return m
}

// renameDays writes CAPI's certificate validity days as kubeadm v1beta4's
// durations.
func renameDays(cc map[string]any) {
	for _, k := range []string{"certificateValidityPeriod", "caCertificateValidityPeriod"} {
		if d, ok := cc[k+"Days"].(float64); ok {
			cc[k] = fmt.Sprintf("%dh0m0s", int(d)*24)
			delete(cc, k+"Days")
		}
	}
}

func (c *conv) users() {
	s := &c.b.Instance.Spec
	// CAPI's users list has no "default" entry: cloud-init creates those
	// users alone, not the image's default user.
	s.CloudInit.NoDefaultUser = len(c.cs.Users) > 0 && !c.ignition
	for i, u := range c.cs.Users {
		p := fmt.Sprintf("%s.users[%d]", c.path, i)
		su := spec.User{Name: u.Name, Gecos: u.Gecos, HomeDir: u.HomeDir, Shell: u.Shell, PrimaryGroup: u.PrimaryGroup,
			Sudo: u.Sudo, SSHAuthorizedKeys: u.SSHAuthorizedKeys, PasswordHash: u.Passwd, LockPassword: u.LockPassword}
		if u.Groups != "" {
			for _, g := range strings.Split(u.Groups, ",") {
				if g = strings.TrimSpace(g); g != "" {
					su.Groups = append(su.Groups, g)
				}
			}
		}
		if sec := u.PasswdFrom.Secret; sec.Name != "" {
			if u.Passwd != "" {
				c.b.Errorf(p, "sets both passwd and passwdFrom: give one")
				continue
			}
			v, err := platform.FetchKey(c.ctx, c.opts.Resolver, "secret", c.ns, sec.Name, sec.Key)
			if err != nil {
				c.b.Err(p+".passwdFrom.secret."+refField(err), err)
				continue
			}
			su.PasswordHash = strings.TrimSpace(string(v))
		}
		if u.LockPassword == nil {
			// cloud-init locks a password unless lock_passwd is false,
			// and CAPI writes lock_passwd only when it is set; its Ignition
			// leaves the password usable.
			lock := !c.ignition
			su.LockPassword = &lock
			if lock && (u.Passwd != "" || u.PasswdFrom.Secret.Name != "") {
				c.b.Warnf(p+".lockPassword", "unset: the password is locked, as cloud-init's default lock_passwd locks it under Cluster API; set lockPassword: false to log in with it")
			}
		}
		if u.Inactive != nil && *u.Inactive {
			if c.ignition {
				c.b.Errorf(p+".inactive", "Ignition cannot create an expired account (CABPK's Ignition drops inactive, and the account stays usable): remove it, or use format cloud-config")
				continue
			}
			c.b.Warnf(p+".inactive", "the account is locked instead (cloud-init's inactive expires it; the spec locks the password)")
			f := true
			su.LockPassword = &f
		}
		c.b.From(fmt.Sprintf("spec.users[%d]", len(s.Users)), p)
		s.Users = append(s.Users, su)
	}
}

func (c *conv) cloudConfigKey(key string, v any, from string) {
	if c.userDoc == nil {
		c.userDoc = map[string]any{}
	}
	c.userDoc[key] = v
	c.b.From("spec.cloudInit.userData", from)
}

func (c *conv) ntp() {
	n := c.cs.NTP
	if len(n.Servers) == 0 && n.Enabled == nil {
		return
	}
	p := c.path + ".ntp"
	if c.ignition {
		// CAPI's Ignition writes ntp as chrony servers for Flatcar's ntpd.
		var sb strings.Builder
		for _, srv := range n.Servers {
			fmt.Fprintf(&sb, "server %s iburst\n", srv)
		}
		c.addFile(textFile("/etc/ntp.conf", 0o644, "", []byte(sb.String())), p)
		if n.Enabled != nil && *n.Enabled {
			t := true
			c.b.Instance.Spec.Units = append(c.b.Instance.Spec.Units, spec.Unit{Name: "ntpd.service", Enabled: &t})
		}
		return
	}
	v := map[string]any{}
	if n.Enabled != nil {
		v["enabled"] = *n.Enabled
	}
	if len(n.Servers) > 0 {
		v["servers"] = n.Servers
	}
	c.cloudConfigKey("ntp", v, p)
}

func (c *conv) mounts() {
	s := &c.b.Instance.Spec
	for i, m := range c.cs.Mounts {
		p := fmt.Sprintf("%s.mounts[%d]", c.path, i)
		if len(m) < 2 {
			c.b.Errorf(p, "want at least a device and a mount point (cloud-init's mounts entry)")
			continue
		}
		sm := spec.Mount{Device: m[0], Path: m[1]}
		if c.ignition && c.isFilesystemLabel(m[0]) {
			// CAPI's Ignition reads the first field as the label of a
			// diskSetup file system (its cloud-config, as a device).
			sm.Device = "LABEL=" + m[0]
		}
		if len(m) > 2 {
			sm.Type = m[2]
		}
		if len(m) > 3 {
			sm.Options = strings.Split(m[3], ",")
		}
		if len(m) > 4 {
			c.b.Warnf(p, "the dump and pass fields are ignored: systemd mount units have no such fields")
		}
		c.b.From(fmt.Sprintf("spec.mounts[%d]", len(s.Mounts)), p)
		s.Mounts = append(s.Mounts, sm)
	}
}

// isFilesystemLabel reports whether label is that of a diskSetup file
// system.
func (c *conv) isFilesystemLabel(label string) bool {
	for _, f := range c.cs.DiskSetup.Filesystems {
		if f.Label == label {
			return true
		}
	}
	return false
}

func (c *conv) diskSetup() {
	ds := c.cs.DiskSetup
	if len(ds.Partitions) == 0 && len(ds.Filesystems) == 0 {
		return
	}
	p := c.path + ".diskSetup"
	if c.ignition {
		c.ignitionStorage(p)
		return
	}
	if st, ok := specStorage(ds); ok {
		c.b.Instance.Spec.Storage = st
		c.b.From("spec.storage", p)
		return
	}
	if len(ds.Partitions) > 0 {
		setup := map[string]any{}
		for _, part := range ds.Partitions {
			e := map[string]any{}
			if part.TableType != "" {
				e["table_type"] = part.TableType
			}
			switch {
			case len(part.DiskLayout) > 0:
				var layout []any
				for _, l := range part.DiskLayout {
					if l.PartitionType != "" {
						layout = append(layout, []any{l.Percentage, partitionType(l.PartitionType)})
					} else {
						layout = append(layout, l.Percentage)
					}
				}
				e["layout"] = layout
			case part.Layout != nil:
				e["layout"] = *part.Layout
			}
			if part.Overwrite != nil {
				e["overwrite"] = *part.Overwrite
			}
			setup[part.Device] = e
		}
		c.cloudConfigKey("disk_setup", setup, p+".partitions")
	}
	if len(ds.Filesystems) > 0 {
		var fs []any
		for _, f := range ds.Filesystems {
			e := map[string]any{"label": f.Label, "filesystem": f.Filesystem, "device": f.Device}
			if f.Partition != "" {
				e["partition"] = f.Partition
			}
			if f.Overwrite != nil {
				e["overwrite"] = *f.Overwrite
			}
			if f.ReplaceFS != "" {
				e["replace_fs"] = f.ReplaceFS
			}
			if len(f.ExtraOpts) > 0 {
				e["extra_opts"] = f.ExtraOpts
			}
			fs = append(fs, e)
		}
		c.cloudConfigKey("fs_setup", fs, p+".filesystems")
	}
}

// ignitionStorage writes diskSetup as Ignition's storage.disks and
// storage.filesystems (spec.ignition.config, merged before
// additionalConfig, which wins as in Cluster API), as CAPI's Ignition
// templates do: a partition layout of true is one partition filling the
// disk, overwrite wipes the table and the filesystem. What Ignition cannot
// express is an error: partition sizes in percent (Ignition's are MiB),
// MBR-only types, cloud-init's partition search and replace_fs.
func (c *conv) ignitionStorage(p string) {
	ds := c.cs.DiskSetup
	var st ign30.Storage
	for i, part := range ds.Partitions {
		pp := fmt.Sprintf("%s.partitions[%d]", p, i)
		d := ign30.Disk{Device: part.Device, WipeTable: part.Overwrite}
		if part.TableType != "" && part.TableType != "gpt" {
			c.b.Warnf(pp+".tableType", "%q: Ignition writes GPT partition tables only; written as gpt, as Cluster API does", part.TableType)
		}
		switch {
		case len(part.DiskLayout) == 1 && part.DiskLayout[0].Percentage == 100:
			guid, err := partitionGUID(part.DiskLayout[0].PartitionType)
			if err != nil {
				c.b.Errorf(pp+".diskLayout[0].partitionType", "%v (CABPK's Ignition ignores partition types)", err)
				continue
			}
			d.Partitions = []ign30.Partition{fillPartition(guid, part.Overwrite)}
		case len(part.DiskLayout) > 0:
			c.b.Errorf(pp+".diskLayout", "partitions in percent of the disk: Ignition sizes partitions in MiB, and the disk's size is known only on the machine (CABPK's Ignition ignores diskLayout and leaves the disk without these partitions); give one partition of 100%%, or write storage.disks in ignition.containerLinuxConfig.additionalConfig")
			continue
		case part.Layout != nil && *part.Layout:
			d.Partitions = []ign30.Partition{fillPartition(nil, part.Overwrite)}
		}
		st.Disks = append(st.Disks, d)
	}
	for i, f := range ds.Filesystems {
		fp := fmt.Sprintf("%s.filesystems[%d]", p, i)
		if f.Device == "" {
			c.b.Errorf(fp+".device", "required: Ignition formats a device it is given (CABPK writes the file system without one, which Ignition refuses)")
			continue
		}
		dev, err := partitionDevice(f.Device, f.Partition)
		if err != nil {
			c.b.Errorf(fp+".partition", "%v (CABPK's Ignition ignores partition and formats the whole device)", err)
			continue
		}
		if f.ReplaceFS != "" {
			c.b.Errorf(fp+".replaceFS", "cloud-init's replace_fs (format over a file system of that type only) has no Ignition equivalent (CABPK's Ignition ignores it): use overwrite")
			continue
		}
		fs := ign30.Filesystem{Device: dev, Format: strPtr(f.Filesystem), Label: strPtr(f.Label), WipeFilesystem: f.Overwrite}
		// extraOpts are mkfs options, as cloud-init passes them (Cluster
		// API's Butane template makes them mount options).
		for _, o := range f.ExtraOpts {
			fs.Options = append(fs.Options, ign30.FilesystemOption(o))
		}
		st.Filesystems = append(st.Filesystems, fs)
	}
	if c.b.HasErrors() || len(st.Disks)+len(st.Filesystems) == 0 {
		return
	}
	cfg := ign30.Config{Ignition: ign30.Ignition{Version: "3.0.0"}, Storage: st}
	out, err := json.Marshal(cfg)
	if err != nil {
		c.b.Errorf(p, "%v", err)
		return
	}
	c.b.Instance.Spec.Ignition.Config = string(out)
	c.b.From("spec.ignition.config", p)
}

// fillPartition is partition 1 filling the disk (Ignition's size 0).
func fillPartition(typeGUID *string, wipe *bool) ign30.Partition {
	n, zero := 1, 0
	return ign30.Partition{Number: n, SizeMiB: &zero, StartMiB: &zero, TypeGUID: typeGUID, WipePartitionEntry: wipe}
}

// partitionGUID is the GPT partition type of CAPI's partition type name
// (or the GUID given), nil for none.
func partitionGUID(t string) (*string, error) {
	var guid string
	switch t {
	case "":
		return nil, nil
	case bootstrapv1.PartitionTypeLinux:
		guid = "0FC63DAF-8483-4772-8E79-3D69D8477DE4"
	case bootstrapv1.PartitionTypeLinuxSwap:
		guid = "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F"
	case bootstrapv1.PartitionTypeLinuxRAID:
		guid = "A19D880F-05FC-4D3B-A006-743F0F84911E"
	case bootstrapv1.PartitionTypeLVM:
		guid = "E6D6D379-F507-44C2-A23C-238F2A3DF928"
	case bootstrapv1.PartitionTypeFat32, bootstrapv1.PartitionTypeNTFS:
		guid = "EBD0A0A2-B9E5-4433-87C0-68B6B72699C7" // Microsoft basic data
	case bootstrapv1.PartitionTypeLinuxExtended:
		return nil, fmt.Errorf("%q: an MBR type, and Ignition writes GPT", t)
	default:
		if _, err := uuid.Parse(t); err != nil || len(t) != 36 {
			return nil, fmt.Errorf("%q: want Linux, LinuxSwap, LinuxRAID, LVM, Fat32, NTFS or a GPT partition type GUID", t)
		}
		guid = strings.ToUpper(t)
	}
	return &guid, nil
}

// partitionDevice is the device of cloud-init's fs_setup device and
// partition: a partition number appended (with "p" after a digit, as
// /dev/nvme0n1p1), the device itself for none.
func partitionDevice(dev, part string) (string, error) {
	switch part {
	case "", "none":
		return dev, nil
	case "auto", "any":
		return "", fmt.Errorf("%q: cloud-init searches the disk for a partition; Ignition needs the device: name the partition (1, 2…) or the partition's device", part)
	}
	n, err := strconv.Atoi(part)
	if err != nil || n < 1 || n > 128 {
		return "", fmt.Errorf("%q: want a partition number, auto, any or none", part)
	}
	if last := dev[len(dev)-1:]; last >= "0" && last <= "9" {
		return fmt.Sprintf("%sp%d", dev, n), nil
	}
	return fmt.Sprintf("%s%d", dev, n), nil
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// partitionType is cloud-init's MBR partition type code for CAPI's name.
func partitionType(t string) string {
	switch t {
	case bootstrapv1.PartitionTypeLinux:
		return "83"
	case bootstrapv1.PartitionTypeLinuxSwap:
		return "82"
	case bootstrapv1.PartitionTypeLinuxRAID:
		return "fd"
	case bootstrapv1.PartitionTypeLVM:
		return "8e"
	case bootstrapv1.PartitionTypeFat32:
		return "0c"
	case bootstrapv1.PartitionTypeNTFS:
		return "07"
	case bootstrapv1.PartitionTypeLinuxExtended:
		return "85"
	}
	return t
}
