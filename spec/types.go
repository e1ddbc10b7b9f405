package spec

// APIVersion and Kind identify an instance spec document.
const (
	APIVersion = "vminit.dev/v1alpha1"
	Kind       = "Instance"
)

// Instance is one virtual machine's first-boot configuration: the document a
// user writes. It renders to cloud-init and to Ignition with the same meaning.
type Instance struct {
	APIVersion string   `yaml:"apiVersion" json:"apiVersion"`
	Kind       string   `yaml:"kind" json:"kind"`
	Metadata   Metadata `yaml:"metadata" json:"metadata"`
	Spec       Spec     `yaml:"spec" json:"spec"`
}

// Metadata names the instance.
type Metadata struct {
	// Name identifies the instance. The default hostname and instance-id
	// are derived from it, so renaming an instance gives it a new identity.
	Name   string            `yaml:"name" json:"name"`
	Labels map[string]string `yaml:"labels,omitempty" json:"labels,omitempty"`
}

// The guest agents an instance can be rendered for (Spec.Agent).
const (
	AgentCloudInit = "cloud-init"
	AgentIgnition  = "ignition"
	// AgentCloudbaseInit is cloudbase-init, the first-boot agent of
	// Windows cloud images: it reads the same seeds and metadata dialects
	// as cloud-init, but its own user data (package cloudbaseinit).
	AgentCloudbaseInit = "cloudbase-init"
)

// ReportsFirstBoot reports whether a guest of agent tells the metadata
// server how its first boot goes: cloud-init posts its stages and modules
// through its reporting webhook and a final report from a unit vminit
// adds, Ignition a report from its completion unit. cloudbase-init has no
// reporting hook, and vminit ships no PowerShell reporter it cannot test:
// its guest is heard of only by its fetches, so nobody can say that its
// first boot stalled or ended. The one rule of which agents report: the
// metadata server's user data (no report unit for those that do not) and
// its first-boot tracker (mdserver.NewTracker: such a boot never stalls,
// and nobody waits for its end) ask it.
func ReportsFirstBoot(agent string) bool { return agent != AgentCloudbaseInit }

// The Ignition guest families (Ignition.Variant). They decide conventions
// the config cannot: how network settings are written (NetworkManager
// keyfiles on FCOS and RHCOS, systemd-networkd on Flatcar).
const (
	VariantFCOS    = "fcos"
	VariantRHCOS   = "rhcos"
	VariantFlatcar = "flatcar"
)

// The seed datasources a spec can name (Spec.Datasource).
const (
	DatasourceNoCloud     = "nocloud"
	DatasourceConfigDrive = "configdrive"
)

// LabelUserData is the label that chose the guest agent before spec.agent
// existed ("cloud-init" or "ignition"). It is still honoured when
// spec.agent is empty, and must agree with it when both are set.
//
// Deprecated: set spec.agent.
const LabelUserData = "vminit.dev/user-data"

// Spec is what the guest gets on first boot.
//
// The kubebuilder markers in this package shape the schema of the
// Instance CustomResourceDefinition (kube/api/v1alpha1), generated from
// these types: they repeat, for the API server, the few rules of Validate
// that a schema can state; Validate stays the rule.
//
// +kubebuilder:validation:XValidation:rule="!has(self.fqdn) || !has(self.hostname) || self.fqdn.startsWith(self.hostname + '.')",message="must start with spec.hostname and a dot",fieldPath=".fqdn"
// +kubebuilder:validation:XValidation:rule="!has(self.network) || !has(self.cloudInit) || !has(self.cloudInit.networkConfig)",message="set either spec.network or spec.cloudInit.networkConfig, not both",fieldPath=".cloudInit.networkConfig"
type Spec struct {
	// Agent is the program in the guest that applies the first-boot data:
	// "cloud-init" (most Linux cloud images), "ignition" (Fedora CoreOS,
	// RHCOS, Flatcar) or "cloudbase-init" (Windows). It decides what every
	// output carries: a seed's user-data, the metadata server's user data
	// in every dialect, and what validate checks. Defaults to "ignition"
	// when spec.ignition is set, else "cloud-init".
	// +kubebuilder:validation:Enum=cloud-init;ignition;cloudbase-init
	Agent string `yaml:"agent,omitempty" json:"agent,omitempty"`
	// Hostname is the short host name (one RFC 1123 label). Defaults to
	// the first label of metadata.name.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Hostname string `yaml:"hostname,omitempty" json:"hostname,omitempty"`
	// FQDN is the fully qualified name; its first label must equal Hostname
	// when both are set.
	// +kubebuilder:validation:MaxLength=253
	FQDN string `yaml:"fqdn,omitempty" json:"fqdn,omitempty"`
	// InstanceID is what cloud-init compares on every boot to decide whether
	// this is a first boot. Defaults to a UUID derived from metadata.name
	// (never random: a changing instance-id re-runs first boot).
	// +kubebuilder:validation:MaxLength=255
	InstanceID string `yaml:"instanceID,omitempty" json:"instanceID,omitempty"`
	// SSHAuthorizedKeys go to the image's default user: cloud-init's
	// meta-data public-keys (the distro's default user, e.g. "ubuntu") and
	// Ignition's "core" user.
	// +kubebuilder:validation:MaxItems=10000
	SSHAuthorizedKeys []string `yaml:"sshAuthorizedKeys,omitempty" json:"sshAuthorizedKeys,omitempty"`
	// SSHAuthorizedKeysFrom adds the keys of a file or a Secret or
	// ConfigMap key, one authorized_keys line a key, to SSHAuthorizedKeys
	// (the default user's), as users[].sshAuthorizedKeysFrom does a
	// user's.
	SSHAuthorizedKeysFrom *ValueFrom `yaml:"sshAuthorizedKeysFrom,omitempty" json:"sshAuthorizedKeysFrom,omitempty"`
	// SSHHostKeys are the guest's SSH host keys (private keys, taken by
	// reference only), so that known_hosts can hold them before the first
	// boot.
	SSHHostKeys *SSHHostKeys `yaml:"sshHostKeys,omitempty" json:"sshHostKeys,omitempty"`

	// +kubebuilder:validation:MaxItems=10000
	Users []User `yaml:"users,omitempty" json:"users,omitempty"`
	// +kubebuilder:validation:MaxItems=10000
	Files []File `yaml:"files,omitempty" json:"files,omitempty"`
	// +kubebuilder:validation:MaxItems=10000
	Units []Unit `yaml:"units,omitempty" json:"units,omitempty"`
	// Commands run once, on first boot, in order, late in boot.
	//
	// Each is a string or a list of strings, which a structural schema
	// cannot say (nor can a CEL rule check an untyped value): the CRD
	// leaves the list untyped, and validation reports a bad command.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Commands []Command `yaml:"commands,omitempty" json:"commands,omitempty"`
	// BootCommands run early on every boot (cloud-init's bootcmd).
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	BootCommands []Command `yaml:"bootCommands,omitempty" json:"bootCommands,omitempty"`
	// +kubebuilder:validation:MaxItems=10000
	Mounts []Mount `yaml:"mounts,omitempty" json:"mounts,omitempty"`
	// Storage partitions and formats disks, grows the root and adds swap.
	Storage *Storage `yaml:"storage,omitempty" json:"storage,omitempty"`
	// Timezone is an IANA zone name such as "Europe/Berlin" or "UTC".
	Timezone string `yaml:"timezone,omitempty" json:"timezone,omitempty"`
	// NTP names the time servers the guest synchronises with.
	NTP *NTP `yaml:"ntp,omitempty" json:"ntp,omitempty"`
	// Packages are installed by cloud-init's package module on first boot.
	// +kubebuilder:validation:MaxItems=10000
	Packages []string `yaml:"packages,omitempty" json:"packages,omitempty"`
	Network  *Network `yaml:"network,omitempty" json:"network,omitempty"`
	// Datasource is the seed disk a build writes when not told otherwise:
	// "nocloud" (label cidata, the default) or "configdrive" (label
	// config-2). It lets a spec say what its platform attaches, e.g. a
	// KubeVirt cloudInitConfigDrive volume; build's --datasource wins.
	// +kubebuilder:validation:Enum=nocloud;configdrive
	Datasource string `yaml:"datasource,omitempty" json:"datasource,omitempty"`

	CloudInit CloudInit `yaml:"cloudInit,omitempty" json:"cloudInit,omitempty"`
	Ignition  Ignition  `yaml:"ignition,omitempty" json:"ignition,omitempty"`
	// MetadataServer tells `vminit serve` how to recognise and serve this
	// instance over HTTP. Seeds ignore it.
	MetadataServer *MetadataServer `yaml:"metadataServer,omitempty" json:"metadataServer,omitempty"`
}

// NTP is the guest's time servers: cloud-init's ntp module and
// cloudbase-init's ntp plugin take both lists (Ignition configures no time
// service).
type NTP struct {
	// Servers are host names or IP addresses of single servers.
	// +kubebuilder:validation:MaxItems=10000
	Servers []string `yaml:"servers,omitempty" json:"servers,omitempty"`
	// Pools are host names of server pools, e.g. "pool.ntp.org".
	// +kubebuilder:validation:MaxItems=10000
	Pools []string `yaml:"pools,omitempty" json:"pools,omitempty"`
}

// User is a local account.
type User struct {
	Name  string `yaml:"name" json:"name"`
	Gecos string `yaml:"gecos,omitempty" json:"gecos,omitempty"`
	// PrimaryGroup defaults to a group named after the user.
	PrimaryGroup string   `yaml:"primaryGroup,omitempty" json:"primaryGroup,omitempty"`
	Groups       []string `yaml:"groups,omitempty" json:"groups,omitempty"`
	Shell        string   `yaml:"shell,omitempty" json:"shell,omitempty"`
	HomeDir      string   `yaml:"homeDir,omitempty" json:"homeDir,omitempty"`
	// Sudo is a sudoers rule for this user, e.g. "ALL=(ALL) NOPASSWD:ALL".
	Sudo string `yaml:"sudo,omitempty" json:"sudo,omitempty"`
	// PasswordHash is a crypt(3) hash ($6$…, $y$…); generate one with
	// `mkpasswd -m sha-512`. Plain-text passwords are refused.
	PasswordHash string `yaml:"passwordHash,omitempty" json:"passwordHash,omitempty"`
	// PasswordHashFrom takes PasswordHash from a file beside the spec or
	// a Secret key in the Instance's namespace, so that the hash need not
	// sit in the spec.
	PasswordHashFrom *ValueFrom `yaml:"passwordHashFrom,omitempty" json:"passwordHashFrom,omitempty"`
	// Password is for Windows, which takes no crypt hash: a cloudbase-init
	// guest's user password, in plain text as cloudbase-init reads it.
	// Refused for cloud-init and Ignition, where a hash does the job.
	Password string `yaml:"password,omitempty" json:"password,omitempty"`
	// LockPassword disables password login. Defaults to true, as in
	// cloud-init, unless PasswordHash is set.
	LockPassword      *bool    `yaml:"lockPassword,omitempty" json:"lockPassword,omitempty"`
	SSHAuthorizedKeys []string `yaml:"sshAuthorizedKeys,omitempty" json:"sshAuthorizedKeys,omitempty"`
	// SSHAuthorizedKeysFrom adds the keys of a file or a Secret or
	// ConfigMap key, one authorized_keys line a key, to SSHAuthorizedKeys.
	SSHAuthorizedKeysFrom *ValueFrom `yaml:"sshAuthorizedKeysFrom,omitempty" json:"sshAuthorizedKeysFrom,omitempty"`
	// System creates a system account (no home directory, low UID).
	System bool `yaml:"system,omitempty" json:"system,omitempty"`
}

// File is a file written into the guest.
//
// +kubebuilder:validation:XValidation:rule="[has(self.content), has(self.contentBase64), has(self.source)].filter(x, x).size() <= 1",message="set only one of content, contentBase64 and source"
type File struct {
	// Path is absolute and clean.
	Path string `yaml:"path" json:"path"`
	// Mode is octal; defaults to 0644.
	Mode *Mode `yaml:"mode,omitempty" json:"mode,omitempty"`
	// Owner is "user", "user:group" or ":group"; defaults to root:root.
	Owner string `yaml:"owner,omitempty" json:"owner,omitempty"`
	// Exactly one of Content, ContentBase64 and Source may be set; none
	// means an empty file.
	Content       *string `yaml:"content,omitempty" json:"content,omitempty"`
	ContentBase64 string  `yaml:"contentBase64,omitempty" json:"contentBase64,omitempty"`
	// Source takes the content from a file beside the spec, or from a
	// Secret or ConfigMap key in the Instance's namespace.
	Source *ValueFrom `yaml:"source,omitempty" json:"source,omitempty"`
	// Append adds the content to an existing file instead of replacing it.
	Append bool `yaml:"append,omitempty" json:"append,omitempty"`

	// data is the resolved content (after base64 decoding or reading
	// Source.File), filled by Load. The tag keeps it out of Kubernetes
	// objects: apimachinery's unstructured converter, unlike
	// encoding/json, walks unexported fields too.
	data []byte `json:"-"`
}

// Data returns the file's resolved content. It is valid after Load or
// Resolve.
func (f *File) Data() []byte { return f.data }

// FileSource takes a file's content from outside the spec.
//
// Deprecated: it is ValueFrom, which File.Source now is.
type FileSource = ValueFrom

// Unit is a systemd unit.
type Unit struct {
	// Name includes the suffix, e.g. "app.service".
	Name string `yaml:"name" json:"name"`
	// Enabled enables the unit (from its [Install] section) at first boot.
	Enabled *bool `yaml:"enabled,omitempty" json:"enabled,omitempty"`
	// Content is the unit file; empty with Dropins set means the unit is
	// provided by the image and only drop-ins are added.
	Content string `yaml:"content,omitempty" json:"content,omitempty"`
	// +kubebuilder:validation:MaxItems=10000
	Dropins []Dropin `yaml:"dropins,omitempty" json:"dropins,omitempty"`
}

// Dropin is a systemd drop-in file, written to <unit>.d/<name>.
type Dropin struct {
	Name string `yaml:"name" json:"name"`
	// +optional
	Content string `yaml:"content" json:"content"`
}

// Mount is a filesystem mounted at boot. It is rendered as a systemd mount
// unit rather than an fstab line: cloud-init 22.4's mounts module drops
// LABEL= and UUID= devices. Add the nofail option for a device that may be
// absent, or boot waits for it.
type Mount struct {
	// Device is a device path, LABEL=…, UUID=… or a network source.
	Device string `yaml:"device" json:"device"`
	// Path is the absolute mount point.
	Path string `yaml:"path" json:"path"`
	// Type is the filesystem type; defaults to "auto".
	Type    string   `yaml:"type,omitempty" json:"type,omitempty"`
	Options []string `yaml:"options,omitempty" json:"options,omitempty"`
}

// CloudInit holds cloud-init data passed through to the guest.
type CloudInit struct {
	// UserData is raw user-data. A #cloud-config document is merged into
	// the generated one with cloud-init's merge rules; any other part type
	// (#!, #include, MIME…) is combined with it as MIME multipart.
	UserData string `yaml:"userData,omitempty" json:"userData,omitempty"`
	// UserDataFrom takes UserData from a file beside the spec, or a
	// Secret or ConfigMap key in the Instance's namespace.
	UserDataFrom *ValueFrom `yaml:"userDataFrom,omitempty" json:"userDataFrom,omitempty"`
	// UserDataOnly makes UserData the whole user-data, byte for byte, with
	// nothing generated into it: for guests that read neither MIME nor
	// #cloud-config (CirrOS runs a #! user-data and nothing else), and to
	// give a guest exactly what a platform gave it. The spec may then set
	// only what meta-data and network configuration carry (hostname,
	// instanceID, sshAuthorizedKeys, network, cloudInit's networkConfig,
	// metaData and vendorData); cloud-init takes the host name from
	// meta-data then.
	UserDataOnly bool `yaml:"userDataOnly,omitempty" json:"userDataOnly,omitempty"`
	// NoDefaultUser leaves the image's default user (ubuntu, fedora…) out
	// of the generated users list, so spec.users are the only accounts
	// cloud-init creates: what oVirt's user_name means (it renames the
	// default user). The default user takes spec.sshAuthorizedKeys, so
	// they are refused with it.
	NoDefaultUser bool `yaml:"noDefaultUser,omitempty" json:"noDefaultUser,omitempty"`
	// VendorData is written as vendor-data unchanged.
	VendorData string `yaml:"vendorData,omitempty" json:"vendorData,omitempty"`
	// NetworkConfig is network configuration written to the seed as given,
	// for platforms whose users supply it as text (KubeVirt's networkData):
	// NoCloud's network-config (version 1 or 2 YAML) or ConfigDrive's
	// network_data.json (OpenStack JSON). It is checked against the format
	// the datasource reads, and excludes spec.network.
	NetworkConfig string `yaml:"networkConfig,omitempty" json:"networkConfig,omitempty"`
	// MetaData adds keys to the generated meta-data. It may not override
	// instance-id or local-hostname: set spec.instanceID or spec.hostname.
	//
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	MetaData map[string]any `yaml:"metaData,omitempty" json:"metaData,omitempty"`
}

// Ignition holds Ignition data supplied by the user, merged with the config
// generated from the spec (the user's config is the child: its values win).
type Ignition struct {
	// Variant is the Ignition guest family: "fcos" (default), "rhcos" or
	// "flatcar".
	// +kubebuilder:validation:Enum=fcos;rhcos;flatcar
	Variant string `yaml:"variant,omitempty" json:"variant,omitempty"`
	// Version forces the Ignition spec version of the rendered config, e.g.
	// "3.4.0"; by default it is the lowest version that expresses it.
	Version string `yaml:"version,omitempty" json:"version,omitempty"`
	// Config is an Ignition config (JSON, any 3.x spec version).
	Config string `yaml:"config,omitempty" json:"config,omitempty"`
	// Butane is a Butane document (variants fcos, flatcar, or openshift
	// translated as raw Ignition), translated and then merged like Config.
	Butane string `yaml:"butane,omitempty" json:"butane,omitempty"`
}

// MetadataServer configures how the metadata server identifies and serves
// an instance.
type MetadataServer struct {
	// Addresses are the source IP addresses the instance's requests come
	// from. The server answers a request only with the data of the
	// instance that owns its source address. Required, except in a
	// cluster, where the addresses of the VMIs naming the Instance
	// identify it.
	// +optional
	Addresses []string `yaml:"addresses" json:"addresses"`
	// IMDSv2 is "optional" (default: tokens accepted, not required, as on
	// EC2 by default) or "required" (token-less EC2 requests get 401, and
	// unless Dialects says otherwise the other dialects, whose clients
	// cannot present a token, do not serve the instance).
	// +kubebuilder:validation:Enum=optional;required
	IMDSv2 string `yaml:"imdsv2,omitempty" json:"imdsv2,omitempty"`
	// Dialects, when set, are the only dialects the metadata server
	// serves the instance through: ec2, openstack, nocloud, ignition. By
	// default every one, except with imdsv2: required, EC2 alone
	// (ServesDialect).
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:Enum=ec2;openstack;nocloud;ignition
	Dialects []string `yaml:"dialects,omitempty" json:"dialects,omitempty"`
	// TokenHopLimit is the IP TTL of IMDSv2 token responses (default 1, as
	// on EC2: a token cannot leave the VM through a router or container
	// bridge). 1–64.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=64
	TokenHopLimit int `yaml:"tokenHopLimit,omitempty" json:"tokenHopLimit,omitempty"`
	// Region, AvailabilityZone and InstanceType fill the EC2 placement and
	// instance-type keys; defaults "vminit", "vminit-a" and "vminit.vm".
	Region           string `yaml:"region,omitempty" json:"region,omitempty"`
	AvailabilityZone string `yaml:"availabilityZone,omitempty" json:"availabilityZone,omitempty"`
	InstanceType     string `yaml:"instanceType,omitempty" json:"instanceType,omitempty"`
}
