package spec

import (
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

// Default fills in the fields a spec may leave out: hostname (the first
// label of metadata.name, or of fqdn), instanceID, agent (and for Ignition
// the variant), and each user's lockPassword (true unless the user has a
// passwordHash). It is idempotent; Load calls it.
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
			lock := u.PasswordHash == ""
			u.LockPassword = &lock
		}
	}
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
