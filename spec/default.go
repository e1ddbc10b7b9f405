package spec

import (
	"slices"
	"strings"

	"github.com/google/uuid"
)

// instanceIDNamespace is the UUIDv5 namespace of derived instance-ids. It
// must never change: every existing VM's identity depends on it.
var instanceIDNamespace = uuid.MustParse("5b0f6f0e-3c0a-5d4e-9a57-7a3f4c1e2b90")

// DefaultInstanceID returns the instance-id derived from an instance name:
// a name-based (version 5) UUID, so the same name always gives the same id
// and ConfigDrive, which wants a UUID, can use it as is.
func DefaultInstanceID(name string) string {
	return uuid.NewSHA1(instanceIDNamespace, []byte(name)).String()
}

// The defaults Default fills in that are not derived from other fields.
const (
	// DefaultFileMode is a file's mode when spec.files[].mode is unset.
	DefaultFileMode Mode = 0o644
	// DefaultRegion, DefaultAvailabilityZone and DefaultInstanceType are
	// what the metadata server reports as the EC2 placement and instance
	// type.
	DefaultRegion           = "vminit"
	DefaultAvailabilityZone = "vminit-a"
	DefaultInstanceType     = "vminit.vm"
	// DefaultTokenHopLimit is the IP TTL of IMDSv2 token responses: as on
	// EC2, a token cannot leave the VM through a router or container
	// bridge.
	DefaultTokenHopLimit = 1
	// DefaultIMDSv2 accepts IMDSv2 tokens without requiring them, as EC2
	// does by default.
	DefaultIMDSv2 = "optional"
)

// Default fills in the fields a spec may leave out: hostname (the first
// label of metadata.name, or of fqdn), instanceID, agent (and for Ignition
// the variant), each user's lockPassword (true unless the user has a
// passwordHash), each file's mode, each storage partition's number and
// type, and the settings of spec.metadataServer when it is present (see
// MetadataServer.Default). It is idempotent; Load
// calls it. Every default of the spec is set here, so that a defaulted
// spec, written out, shows what every consumer will use.
func (in *Instance) Default() {
	s := &in.Spec
	if s.Agent == "" {
		s.Agent = in.defaultAgent()
	}
	if s.Agent == AgentIgnition && s.Ignition.Variant == "" {
		s.Ignition.Variant = VariantFCOS
	}
	if s.Hostname == "" {
		src := in.Metadata.Name
		if s.FQDN != "" {
			src = s.FQDN
		}
		s.Hostname, _, _ = strings.Cut(src, ".")
	}
	if s.InstanceID == "" && in.Metadata.Name != "" {
		s.InstanceID = DefaultInstanceID(in.Metadata.Name)
	}
	for i := range s.Users {
		if u := &s.Users[i]; u.LockPassword == nil {
			// A user given a password hash means to log in with it.
			lock := u.PasswordHash == "" && u.Password == ""
			u.LockPassword = &lock
		}
	}
	for i := range s.Files {
		if f := &s.Files[i]; f.Mode == nil {
			m := DefaultFileMode
			f.Mode = &m
		}
	}
	if s.MetadataServer != nil {
		s.MetadataServer.Default()
	}
	if s.Storage != nil {
		s.Storage.defaultStorage()
	}
}

// Default fills in the metadata server settings left out: imdsv2,
// tokenHopLimit, region, availabilityZone and instanceType.
func (ms *MetadataServer) Default() {
	if ms.IMDSv2 == "" {
		ms.IMDSv2 = DefaultIMDSv2
	}
	if ms.TokenHopLimit == 0 {
		ms.TokenHopLimit = DefaultTokenHopLimit
	}
	if ms.Region == "" {
		ms.Region = DefaultRegion
	}
	if ms.AvailabilityZone == "" {
		ms.AvailabilityZone = DefaultAvailabilityZone
	}
	if ms.InstanceType == "" {
		ms.InstanceType = DefaultInstanceType
	}
}

// The metadata server's dialects, as spec.metadataServer.dialects names
// them.
const (
	DialectEC2       = "ec2"
	DialectOpenStack = "openstack"
	DialectNoCloud   = "nocloud"
	DialectIgnition  = "ignition"
)

// Dialects are every dialect the metadata server speaks: the names
// spec.metadataServer.dialects may list, in the order of its metrics. The
// list is here, not derived from the server's registry (mdserver.Dialects,
// which TestDialectsMatchSpec holds to it), because every program
// validates specs, linked with the server or not, and the CRD's enum is
// generated from MetadataServer.Dialects' markers (TestDialectsMarkers
// holds them to it).
var Dialects = []string{DialectEC2, DialectOpenStack, DialectNoCloud, DialectIgnition}

// ServesDialect reports whether the metadata server serves the instance
// through dialect d: one of Dialects when they are listed; else every
// dialect, except with imdsv2: required, which only the EC2 dialect
// enforces (its clients present a token; the other dialects' clients,
// cloud-init's OpenStack and NoCloud datasources and Ignition's openstack
// platform, send none), so only EC2 serves such an instance. A nil ms (no
// spec.metadataServer) serves every dialect.
func (ms *MetadataServer) ServesDialect(d string) bool {
	switch {
	case ms == nil:
		return true
	case len(ms.Dialects) > 0:
		return slices.Contains(ms.Dialects, d)
	}
	return ms.IMDSv2 != "required" || d == DialectEC2
}

// MetadataServerSettings returns spec.metadataServer with its defaults:
// the settings the metadata server applies to the instance. An instance
// without spec.metadataServer has no address of its own but can still be
// served (named by a trusted proxy, or previewed), with the defaults.
func (s *Spec) MetadataServerSettings() MetadataServer {
	var ms MetadataServer
	if s.MetadataServer != nil {
		ms = *s.MetadataServer
	}
	ms.Default()
	return ms
}

// defaultAgent is the agent of a spec that does not name one: the
// deprecated LabelUserData when it holds an agent's name, else Ignition
// when spec.ignition says anything, else cloud-init.
func (in *Instance) defaultAgent() string {
	switch l := in.Metadata.Labels[LabelUserData]; l {
	case AgentCloudInit, AgentIgnition:
		return l
	}
	if ig := in.Spec.Ignition; ig != (Ignition{}) {
		return AgentIgnition
	}
	return AgentCloudInit
}
