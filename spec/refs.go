package spec

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ValueFrom takes a field's value from outside the spec, so that a secret
// (a password hash, a private key, user data with credentials) need not
// sit in the spec: on the command line from a file beside the spec
// (File, confined as files[].source.file is), on Kubernetes from a key of
// a Secret or ConfigMap in the Instance's own namespace. A reference
// names no namespace: an Instance reads only its own namespace's objects.
// Exactly one of File, SecretKeyRef and ConfigMapKeyRef is set.
//
// +kubebuilder:validation:XValidation:rule="[has(self.file), has(self.secretKeyRef), has(self.configMapKeyRef)].filter(x, x).size() == 1",message="set exactly one of file, secretKeyRef and configMapKeyRef"
// +kubebuilder:validation:XValidation:rule="!has(self.file)",message="file is not allowed in an Instance object (the cluster's servers never read their own files): use secretKeyRef or configMapKeyRef, or inline the value",fieldPath=".file"
type ValueFrom struct {
	// File is a path on the machine that loads the spec, relative to the
	// spec file's directory and confined to it (vminit --source-root
	// widens it). Not in an Instance object: the cluster's servers never
	// read their own files.
	File string `yaml:"file,omitempty" json:"file,omitempty"`
	// SecretKeyRef is a key of a Secret in the Instance's namespace.
	SecretKeyRef *KeyRef `yaml:"secretKeyRef,omitempty" json:"secretKeyRef,omitempty"`
	// ConfigMapKeyRef is a key of a ConfigMap in the Instance's namespace
	// (not for a password hash or a private key: those belong in a
	// Secret).
	ConfigMapKeyRef *KeyRef `yaml:"configMapKeyRef,omitempty" json:"configMapKeyRef,omitempty"`

	// data is the value read, filled by Load (or Resolve); resolved says
	// it was read, which Validate needs to tell a value it filled in from
	// one the user wrote beside the reference. The tag keeps data out of
	// Kubernetes objects (see File.data).
	data     []byte `json:"-"`
	resolved bool   `json:"-"`
	// added is how many entries the value added to a list it fills
	// (sshAuthorizedKeysFrom), for ForAPI to take them out again.
	added int `json:"-"`
}

// KeyRef names one key of a Secret or ConfigMap in the Instance's own
// namespace.
type KeyRef struct {
	// Name is the object's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `yaml:"name" json:"name"`
	// Key is the key of its data.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `yaml:"key" json:"key"`
}

// Data returns the value read for the reference, nil before Load or
// Resolve (or when it could not be read).
func (v *ValueFrom) Data() []byte {
	if v == nil {
		return nil
	}
	return v.data
}

// The kinds of object a Refs reads.
const (
	RefSecret    = "Secret"
	RefConfigMap = "ConfigMap"
)

// Refs reads the Secret and ConfigMap keys a spec refers to, in the one
// namespace its caller chose (the Instance's own): a reference names no
// namespace. platform.SpecRefs adapts a platform.Resolver to it.
type Refs interface {
	// Key returns the value of key in the object kind (RefSecret or
	// RefConfigMap) called name. Its error says what is missing
	// ("Secret "db" not found in namespace "a"").
	Key(kind, name, key string) ([]byte, error)
}

// ErrNoRefs is the cause of the problem reported for a Secret or
// ConfigMap reference where the spec is loaded without a Refs.
var ErrNoRefs = errors.New("no cluster to read Secrets and ConfigMaps from")

// keepRefs is the Refs of Resolve: Secret and ConfigMap references are
// left unresolved, without a problem.
type keepRefs struct{}

func (keepRefs) Key(string, string, string) ([]byte, error) { return nil, ErrNoRefs }

// refField is one reference of a spec and what its value becomes.
type refField struct {
	field string // spec.users[0].passwordHashFrom
	ref   *ValueFrom
	// secret refuses a ConfigMap: the value is a secret.
	secret bool
	// inline reports whether the user also set the field the reference
	// fills (Validate then refuses both; nothing is read).
	inline bool
	// apply checks the value read and fills it in, adding its problems
	// to c under field.
	apply func(c *ErrorList, field string, value []byte)
	// forAPI fits the field to a document sent over an API (ForAPI);
	// nil: nothing to do.
	forAPI func()
}

// refFields lists the spec's references, in field order.
func (in *Instance) refFields() []refField {
	s := &in.Spec
	var out []refField
	for i := range s.Users {
		u := &s.Users[i]
		f := fmt.Sprintf("spec.users[%d]", i)
		if r := u.PasswordHashFrom; r != nil {
			out = append(out, refField{f + ".passwordHashFrom", r, true, u.PasswordHash != "" && !r.resolved, func(c *ErrorList, field string, v []byte) {
				u.PasswordHash = strings.TrimSpace(string(v))
			}, func() { forAPI(&u.PasswordHashFrom, &u.PasswordHash) }})
		}
		if u.SSHAuthorizedKeysFrom != nil {
			out = append(out, keysRef(f+".sshAuthorizedKeysFrom", &u.SSHAuthorizedKeys, &u.SSHAuthorizedKeysFrom))
		}
	}
	if s.SSHAuthorizedKeysFrom != nil {
		out = append(out, keysRef("spec.sshAuthorizedKeysFrom", &s.SSHAuthorizedKeys, &s.SSHAuthorizedKeysFrom))
	}
	for i := range s.Files {
		fl := &s.Files[i]
		if fl.Source != nil {
			out = append(out, refField{fmt.Sprintf("spec.files[%d].source", i), fl.Source, false, false, func(_ *ErrorList, _ string, v []byte) {
				fl.data = v
			}, func() {
				if fl.Source.File != "" {
					fl.ContentBase64, fl.Content, fl.Source = base64.StdEncoding.EncodeToString(fl.data), nil, nil
				}
			}})
		}
	}
	if ci := &s.CloudInit; ci.UserDataFrom != nil {
		out = append(out, refField{"spec.cloudInit.userDataFrom", ci.UserDataFrom, false, ci.UserData != "" && !ci.UserDataFrom.resolved, func(_ *ErrorList, _ string, v []byte) {
			ci.UserData = string(v)
		}, func() { forAPI(&ci.UserDataFrom, &ci.UserData) }})
	}
	return append(out, s.SSHHostKeys.refFields()...)
}

// keysRef is the reference *ref (sshAuthorizedKeysFrom, the default
// user's or a user's) that adds its keys, one authorized_keys line each,
// to *keys.
func keysRef(field string, keys *[]string, ref **ValueFrom) refField {
	r := *ref
	return refField{field, r, false, false, func(c *ErrorList, field string, v []byte) {
		added := keyLines(c, field, v)
		*keys, r.added = append(*keys, added...), len(added)
	}, func() {
		if r.File != "" {
			*ref = nil
		} else if r.resolved {
			*keys = (*keys)[:len(*keys)-r.added]
		}
	}}
}

// forAPI fits a string field *value and the reference *ref that fills it
// to a document sent over an API: a file's value stays and the reference
// goes; a Secret's or ConfigMap's value goes and the reference stays.
func forAPI(ref **ValueFrom, value *string) {
	switch r := *ref; {
	case r.File != "":
		*ref = nil
	case r.resolved:
		*value = ""
	}
}

// ForAPI returns a copy of the instance (after Load or Resolve) as a
// document sent over an API must be (the admin API, etcd, an Instance
// object), and whether in has references that make it differ (a caller
// may send the document as written otherwise): the values of file references
// inlined in the fields they fill (files' as contentBase64), the receiver
// never reading its own files; Secret and ConfigMap references kept for
// the receiver to resolve in its namespace, and the values they filled
// in left out. spec.sshHostKeys are never inlined: a file named there
// stays, and the receiver refuses it.
func (in *Instance) ForAPI() (*Instance, bool) {
	out := *in
	s := &out.Spec
	s.Users, s.Files = slices.Clone(s.Users), slices.Clone(s.Files)
	changed := false
	for _, rf := range out.refFields() {
		if rf.forAPI != nil {
			rf.forAPI()
			changed = true
		}
	}
	return &out, changed
}

// keyLines is an authorized_keys text's keys, one a line (blank lines and
// # comments skipped), each checked; a key that does not parse is a
// problem naming its line, and is left out. More than a list's
// MaxListEntries is a problem, and none is taken.
func keyLines(c *ErrorList, field string, v []byte) []string {
	var keys []string
	for n, line := range strings.Split(string(v), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if len(keys) == MaxListEntries {
			c.Add(field, "more than %d keys (line %d); the limit of a list", MaxListEntries, n+1)
			return nil
		}
		if msg, drop := AuthorizedKeyProblem(line); drop {
			c.Add(field, "line %d: %s", n+1, msg)
			continue
		}
		keys = append(keys, line)
	}
	return keys
}

// resolveRefs reads every reference of the spec (files through readFile,
// Secrets and ConfigMaps through refs) and fills in their values.
func (in *Instance) resolveRefs(c *ErrorList, refs Refs, readFile func(c *ErrorList, field, name string) ([]byte, bool)) {
	for _, rf := range in.refFields() {
		if rf.inline || rf.ref.resolved {
			continue
		}
		v, ok := rf.read(c, refs, readFile)
		if !ok {
			continue
		}
		rf.ref.data, rf.ref.resolved = v, true
		rf.apply(c, rf.field, v)
	}
}

// read reads one reference's value, or adds why it cannot to c.
func (rf refField) read(c *ErrorList, refs Refs, readFile func(c *ErrorList, field, name string) ([]byte, bool)) ([]byte, bool) {
	r := rf.ref
	kind, ref, field := RefSecret, r.SecretKeyRef, rf.field+".secretKeyRef"
	switch {
	case r.File != "":
		return readFile(c, rf.field+".file", r.File)
	case r.ConfigMapKeyRef != nil && rf.secret:
		c.Add(rf.field+".configMapKeyRef", "a secret belongs in a Secret: use secretKeyRef")
		return nil, false
	case r.ConfigMapKeyRef != nil:
		kind, ref, field = RefConfigMap, r.ConfigMapKeyRef, rf.field+".configMapKeyRef"
	case ref == nil:
		return nil, false // Validate says what is missing
	}
	if _, keep := refs.(keepRefs); keep {
		return nil, false
	}
	if refs == nil {
		c.list = append(c.list, &FieldError{Field: field, Cause: ErrNoRefs,
			Message: fmt.Sprintf("%s %q is read from the Instance's namespace on Kubernetes (vminit-controller, `vminit serve --kubernetes`); here pass --kubeconfig (and --namespace) to read it from a cluster or --objects FILE holding it, or take the value from a file beside the spec with file:", kind, ref.Name)})
		return nil, false
	}
	v, err := refs.Key(kind, ref.Name, ref.Key)
	if err != nil {
		c.list = append(c.list, &FieldError{Field: field, Message: err.Error(), Cause: err})
		return nil, false
	}
	if len(v) > MaxSourceFileSize {
		c.Add(field, "%s %q key %q holds %d bytes; the limit is %d", kind, ref.Name, ref.Key, len(v), MaxSourceFileSize)
		return nil, false
	}
	return bytes.Clone(v), true
}

// validateRef checks a reference's shape: exactly one source, and a
// Secret where the value is a secret. It is empty for a nil ref.
func validateRef(c *ErrorList, field string, r *ValueFrom) {
	if r == nil {
		return
	}
	n := 0
	for _, set := range []bool{r.File != "", r.SecretKeyRef != nil, r.ConfigMapKeyRef != nil} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		c.Add(field, "required: file (beside the spec), secretKeyRef or configMapKeyRef (on Kubernetes)")
	case n > 1:
		c.Add(field, "set exactly one of file, secretKeyRef and configMapKeyRef")
	}
	for _, k := range []struct {
		name string
		ref  *KeyRef
	}{{"secretKeyRef", r.SecretKeyRef}, {"configMapKeyRef", r.ConfigMapKeyRef}} {
		if k.ref == nil {
			continue
		}
		if k.ref.Name == "" {
			c.Add(field+"."+k.name+".name", "required: the object's name (in the Instance's namespace)")
		}
		if k.ref.Key == "" {
			c.Add(field+"."+k.name+".key", "required: the key of its data")
		}
	}
}

// validateRefs checks every reference of the spec: its shape, and that
// the field it fills was not also written inline.
func validateRefs(c *ErrorList, in *Instance) {
	for _, rf := range in.refFields() {
		validateRef(c, rf.field, rf.ref)
		if rf.inline {
			inline := strings.TrimSuffix(rf.field[strings.LastIndex(rf.field, ".")+1:], "From")
			c.Add(rf.field, "set either %s or %s, not both", inline, rf.field[strings.LastIndex(rf.field, ".")+1:])
		}
	}
}

// fromField is field, or its …From twin when ref filled it in: a problem
// with the value names the field the user wrote.
func fromField(field string, ref *ValueFrom) string {
	if ref != nil && ref.resolved {
		return field + "From"
	}
	return field
}

// RefData returns the values the spec's references read (after Load), in
// field order, nil for one not read: what identifies a version of the
// spec beside its document, since a Secret can change while the document
// does not.
func (in *Instance) RefData() [][]byte {
	var out [][]byte
	for _, rf := range in.refFields() {
		out = append(out, rf.ref.data)
	}
	return out
}
