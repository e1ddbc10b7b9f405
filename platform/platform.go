package platform

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// Sentinel errors, matched with errors.Is. Content problems are also
// spec.ErrInvalid, so callers treat them like a spec's.
var (
	// ErrUnknownKind: the document is no object a platform package reads.
	ErrUnknownKind = errors.New("not an object vminit reads")
	// ErrNotFound: a referenced Secret or ConfigMap does not exist.
	ErrNotFound = errors.New("referenced object not found")
	// ErrMissingKey: a referenced Secret or ConfigMap lacks the key.
	ErrMissingKey = errors.New("key not found in referenced object")
	// ErrUnsupported: the object asks for something vminit cannot give
	// the guest (the error says what and why).
	ErrUnsupported = errors.New("not supported")
)

// DefaultNamespace is the namespace of objects that name none, as kubectl
// assumes without --namespace.
const DefaultNamespace = "default"

// Options tune the conversion of platform objects.
type Options struct {
	// Resolver finds referenced Secrets and ConfigMaps; nil finds none.
	Resolver Resolver
	// Namespace is the namespace of objects that name none (default
	// DefaultNamespace).
	Namespace string
	// Confined makes Namespace the only one: an object naming another is
	// an error (CheckNamespace), so no reference is resolved outside it.
	// A command reading a cluster's Secrets sets it: the namespace its
	// user chose is the only one it may read from, whatever an object
	// (perhaps written by someone else) says.
	Confined bool
	// PasswordSalt lets oVirt's root_password be hashed reproducibly
	// (SHA-512 crypt with this salt); without it a plain-text password is
	// refused.
	PasswordSalt string
	// KubernetesVersion is the version Cluster API's kubeadm configuration
	// is written for (CAPI takes it from the Machine); default
	// capi.DefaultKubernetesVersion.
	KubernetesVersion string
	// PoolIndex picks the member of a KubeVirt VirtualMachinePool, the
	// ordinal of a StatefulSet's pod, or the machine of a Cluster API
	// KubeadmControlPlane (0, the first, inits the cluster; the others
	// join it).
	PoolIndex int
	// Machine (--machine) names the machine a Cluster API bootstrap
	// object is built for: its host name and instance id. CAPI builds a
	// template's data per Machine and never names the host itself.
	Machine string
	// BootstrapToken, ControlPlaneEndpoint and CACertHashes are the
	// discovery of a Cluster API machine that joins its cluster, where its
	// object has none: what CABPK fills in from the Cluster.
	BootstrapToken       string
	ControlPlaneEndpoint string
	CACertHashes         []string
	// Name (--name) names a VM whose object does not: an oVirt start
	// action's body has no name, the VM's is in the URL.
	Name string
	// Object picks one of several objects vminit reads in the files:
	// NAME or KIND/NAME (--object); "" converts every one.
	Object string
	// ControlPlane (--control-plane) says whether the machine of a
	// Cluster API KubeadmConfig is a control-plane machine, where no
	// Machine says (Machines, FindMachine); nil leaves it unsaid.
	ControlPlane *bool
	// Machines are the Cluster API Machines beside the objects
	// (convert.Documents adds those of its input): the role of a
	// KubeadmConfig's machine is its Machine's, as for CABPK.
	Machines []Machine
	// FindMachine, when set (--kubeconfig), looks in the cluster for the
	// Machine whose bootstrap config is the KubeadmConfig namespace/name:
	// nil and no error when there is none.
	FindMachine func(ctx context.Context, namespace, config string) (*Machine, error)
	// ControlPlaneInitialized (--control-plane-initialized) says whether
	// the control plane of a Cluster API control-plane machine's cluster
	// is initialized (it joins it) or not (it inits it), where no Cluster
	// says (Clusters, FindCluster); nil leaves it unsaid.
	ControlPlaneInitialized *bool
	// Clusters are the Cluster API Clusters beside the objects
	// (convert.Documents adds those of its input).
	Clusters []Cluster
	// FindCluster, when set (--kubeconfig), reads the Cluster
	// namespace/name from the cluster: an error when there is none.
	FindCluster func(ctx context.Context, namespace, name string) (*Cluster, error)
}

// Machine is what vminit reads of a Cluster API Machine (or MachinePool,
// whose machines are workers): whose bootstrap config it names, and
// whether it is a control-plane machine (the cluster.x-k8s.io/control-plane
// label, as Cluster API's util.IsControlPlaneMachine decides).
type Machine struct {
	Name, Namespace string
	// Config is the name of the KubeadmConfig its spec.bootstrap.configRef
	// names ("" for another kind).
	Config       string
	ControlPlane bool
	// ClusterName is the Cluster it belongs to: spec.clusterName, else
	// its cluster.x-k8s.io/cluster-name label (the Cluster API book's
	// Machine has only the label).
	ClusterName string
	// Where is the Machine's place for messages: FILE:LINE, or the
	// cluster's "Machine NAMESPACE/NAME".
	Where string
}

// Cluster is what vminit reads of a Cluster API Cluster: whether its
// control plane is initialized, which decides, for CABPK, whether a
// control-plane machine inits the cluster or joins its control plane.
type Cluster struct {
	Name, Namespace string
	// Initialized: its ControlPlaneInitialized condition is True. CABPK
	// (cluster-api v1.14.0) reads the v1beta2 condition, and takes a
	// Cluster without it (one as written, which kubectl apply creates
	// without status) as not initialized; the v1beta1 condition of the
	// same name, which older Cluster API set alone, is read too.
	Initialized bool
	// Status is false for a Cluster as written (no status), for messages.
	Status bool
	// Where is the Cluster's place for messages, as Machine's.
	Where string
}

// LabelClusterName names a Cluster API object's Cluster.
const LabelClusterName = "cluster.x-k8s.io/cluster-name"

// ConditionControlPlaneInitialized is the Cluster's condition CABPK reads
// (clusterv1.ClusterControlPlaneInitializedCondition).
const ConditionControlPlaneInitialized = "ControlPlaneInitialized"

// ReadCluster reads a Cluster (cluster.x-k8s.io, v1beta1 or v1beta2) from
// its JSON; ok is false for another kind of object.
func ReadCluster(j []byte) (c Cluster, ok bool) {
	type conditions []struct{ Type, Status string }
	var obj struct {
		objectMeta
		Status *struct {
			// v1beta2's conditions, or v1beta1's own.
			Conditions conditions `json:"conditions"`
			// v1beta1's copy of v1beta2's conditions.
			V1beta2 struct {
				Conditions conditions `json:"conditions"`
			} `json:"v1beta2"`
			// v1beta2's copy of v1beta1's conditions.
			Deprecated struct {
				V1beta1 struct {
					Conditions conditions `json:"conditions"`
				} `json:"v1beta1"`
			} `json:"deprecated"`
		} `json:"status"`
	}
	if json.Unmarshal(j, &obj) != nil || obj.Kind != "Cluster" || !strings.HasPrefix(obj.APIVersion, "cluster.x-k8s.io/") {
		return c, false
	}
	c.Name, c.Namespace = obj.Metadata.Name, obj.Metadata.Namespace
	if st := obj.Status; st != nil {
		c.Status = true
		for _, cs := range []conditions{st.Conditions, st.V1beta2.Conditions, st.Deprecated.V1beta1.Conditions} {
			for _, cond := range cs {
				c.Initialized = c.Initialized || cond.Type == ConditionControlPlaneInitialized && cond.Status == "True"
			}
		}
	}
	return c, true
}

// objectMeta is what the readers here decode of any Kubernetes object's
// JSON: its type and metadata.
type objectMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
}

// LabelControlPlane marks a Cluster API control-plane Machine.
const LabelControlPlane = "cluster.x-k8s.io/control-plane"

// ReadMachine reads a Machine or MachinePool (cluster.x-k8s.io, v1beta1
// or v1beta2) from its JSON; ok is false for another kind of object.
func ReadMachine(j []byte) (m Machine, ok bool) {
	var obj struct {
		objectMeta
		Spec struct {
			machineSpec
			ClusterName string `json:"clusterName"`
			// A MachinePool's machines are its template's.
			Template struct {
				Spec machineSpec `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if json.Unmarshal(j, &obj) != nil {
		return m, false
	}
	group, _, _ := strings.Cut(obj.APIVersion, "/")
	ms := obj.Spec.machineSpec
	switch {
	case obj.Kind == "Machine" && group == "cluster.x-k8s.io":
		_, m.ControlPlane = obj.Metadata.Labels[LabelControlPlane]
	case obj.Kind == "MachinePool" && (group == "cluster.x-k8s.io" || group == "exp.cluster.x-k8s.io"):
		// CABPK joins every MachinePool machine as a worker.
		ms = obj.Spec.Template.Spec
	default:
		return m, false
	}
	m.Name, m.Namespace = obj.Metadata.Name, obj.Metadata.Namespace
	m.ClusterName = cmp.Or(obj.Spec.ClusterName, obj.Metadata.Labels[LabelClusterName])
	if r := ms.Bootstrap.ConfigRef; r != nil && r.Kind == "KubeadmConfig" {
		m.Config = r.Name
	}
	return m, true
}

// machineSpec is what ReadMachine reads of a Machine's spec.
type machineSpec struct {
	Bootstrap struct {
		ConfigRef *struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"configRef"`
	} `json:"bootstrap"`
}

// Scope is the objects an option of Options concerns, by the flag that
// sets it. Given for an input holding none of them, the option would do
// nothing, and whoever passed it expects it to act: Unconcerned says so.
type Scope struct {
	// Flag is the command-line flag: "--machine".
	Flag string
	// For names the objects the option concerns, for messages.
	For      string
	concerns func(*Document) bool
}

// capiObjects is what Cluster API's options concern.
const capiObjects = "a Cluster API KubeadmConfig, KubeadmConfigTemplate, KubeadmControlPlane or KubeadmControlPlaneTemplate"

// Scopes is the one table of the options that concern some objects only
// (Namespace, Resolver and Object concern every one): every command and
// platform goes by it.
var Scopes = []Scope{
	{"--machine", capiObjects, isCAPI},
	{"--bootstrap-token", capiObjects, isCAPI},
	{"--control-plane-endpoint", capiObjects, isCAPI},
	{"--ca-cert-hash", capiObjects, isCAPI},
	{"--kubernetes-version", capiObjects, isCAPI},
	{"--control-plane", capiMachineObject, isCAPIMachine},
	{"--control-plane-initialized", capiMachineObject, isCAPIMachine},
	{"--pool-index", "a KubeVirt VirtualMachinePool (which member), a StatefulSet of Virtlet pods (which ordinal) or a Cluster API KubeadmControlPlane(Template) (which machine)", isPool},
	{"--password-salt", "an oVirt VM body (its initialization.root_password)", isOVirt},
	{"--name", "an oVirt body that names no VM (a start action, whose VM is named in the URL)", func(d *Document) bool {
		return isOVirt(d) && !strings.Contains(d.Object(), "/")
	}},
}

// ownerKind is the kind of the object d is as its file writes it: a
// workload's for the pod template it holds (Document.Object).
func ownerKind(d *Document) string {
	k, _, _ := strings.Cut(d.Object(), "/")
	return k
}

// capiMachineObject is what the options of one Cluster API machine's role
// concern.
const capiMachineObject = "a Cluster API KubeadmConfig (one machine's)"

func isCAPIMachine(d *Document) bool { return isCAPI(d) && d.Kind == "KubeadmConfig" }

func isCAPI(d *Document) bool {
	switch d.Kind {
	case "KubeadmConfig", "KubeadmConfigTemplate", "KubeadmControlPlane", "KubeadmControlPlaneTemplate":
		return strings.Contains(d.APIVersion, ".cluster.x-k8s.io/")
	}
	return false
}

func isPool(d *Document) bool {
	switch {
	case d.Kind == "VirtualMachinePool", ownerKind(d) == "StatefulSet":
		return true
	}
	return isCAPI(d) && strings.HasPrefix(d.Kind, "KubeadmControlPlane")
}

// isOVirt reports whether d, converted, is an oVirt REST body: XML, or
// the JSON of neither apiVersion nor kind that only oVirt's reader takes.
func isOVirt(d *Document) bool {
	return d.Format == XML || d.APIVersion == "" && d.Kind == ""
}

// Unconcerned returns a problem for each of flags (those given, spelled
// as in Scopes) whose option concerns none of results, naming the flag,
// what it concerns and each input read; others name the inputs read
// beside them that are no platform objects ("instance.yaml (a vminit
// spec)"), which no scoped option concerns. An option that concerns one
// object of several (a file validated whole) is no problem: the others do
// not read it.
func Unconcerned(flags []string, results []*Result, others []string) []string {
	var problems []string
	for _, s := range Scopes {
		if !slices.Contains(flags, s.Flag) || slices.ContainsFunc(results, s.concernsResult) {
			continue
		}
		read := slices.Clone(others)
		for _, r := range results {
			read = append(read, r.described())
		}
		problems = append(problems, fmt.Sprintf("%s concerns %s only, and nothing read is one: %s; it would do nothing, so it is refused",
			s.Flag, s.For, strings.Join(read, "; ")))
	}
	return problems
}

func (s Scope) concernsResult(r *Result) bool {
	return r.Doc != nil && s.concerns(r.Doc)
}

// described names the object r came from: KIND/NAME at FILE:LINE.
func (r *Result) described() string {
	if r.Doc == nil {
		return r.Object
	}
	return fmt.Sprintf("%s at %s (%s)", cmp.Or(r.Doc.Object(), "a document"), r.Where, r.Object)
}

// NamespaceOf returns the namespace of an object that names ns.
func (o Options) NamespaceOf(ns string) string {
	if ns != "" {
		return ns
	}
	if o.Namespace != "" {
		return o.Namespace
	}
	return DefaultNamespace
}

// CheckNamespace refuses, when Confined, an object whose
// metadata.namespace is not Namespace, naming the object and the field.
func (o Options) CheckNamespace(doc *Document) *spec.FieldError {
	want := o.NamespaceOf("")
	if !o.Confined || doc.Namespace == "" || doc.Namespace == want {
		return nil
	}
	return doc.Error("metadata.namespace", fmt.Sprintf("%s %q is in namespace %q, not %q: references are resolved in %q only",
		doc.Kind, doc.Name, doc.Namespace, want, want))
}

// Result is a platform object converted to vminit's terms.
type Result struct {
	// Object names the source: "KubeVirt VirtualMachine default/myvm".
	Object string
	// Instance is Spec loaded by spec.Parse: defaulted and valid.
	Instance *spec.Instance
	// Spec is the instance as a vminit spec document (YAML), what
	// `vminit convert --to spec` prints. Building it gives the same bytes
	// as building the platform object.
	Spec []byte
	// Sysprep is a Windows answer-file disc (KubeVirt sysprep volumes),
	// or nil. It has no vminit spec meaning, so Spec does not carry it.
	Sysprep *seed.Seed
	// Warnings are differences from the platform the user should know of
	// (a limit the platform would enforce, a field with no effect).
	Warnings []string
	// Key is the object as --object picks it (KIND/NAME: a workload's, for
	// the pod it holds) and Where its place ("vm.yaml:3"), when
	// convert.Documents read it from a file of several.
	Key, Where string
	// Doc is the document converted (a workload's pod template), when
	// convert.Documents read it: what Unconcerned asks Scopes about.
	Doc *Document

	// builder, when the Result came from Builder.Finish, places problems
	// found in Instance later (Locate).
	builder *Builder
}

// Locate names, for each problem found in Instance after the conversion
// (by a check or a renderer: those name vminit's spec fields and no file),
// the object's field it came from, its line and the object, as the
// conversion names its own problems. Problems already placed in a file
// are kept; those the conversion already warned of (Builder.WarnCause:
// the same spec field and cause) are dropped, so that each is said once,
// in the platform's terms.
func (r *Result) Locate(es spec.Errors) spec.Errors {
	if r == nil || r.builder == nil {
		return es
	}
	out := make(spec.Errors, 0, len(es))
	for _, e := range es {
		switch {
		case r.builder.warnedOf(e): // said by the conversion
		case e.File == "" && e.Line == 0:
			t := r.builder.translate(e)
			t.Cause = e.Cause
			out = append(out, t)
		default:
			out = append(out, e)
		}
	}
	return out
}

// Builder accumulates a conversion: the instance, the problems found
// (each naming the object path), warnings, and where each spec field came
// from, so that a problem the spec's validation finds names the object's
// field instead.
type Builder struct {
	Doc      *Document
	Instance spec.Instance
	Warnings []string
	errs     spec.Errors
	origins  [][2]string // spec path prefix, object path
	// causes are the problems warned of by WarnCause: spec field, cause.
	causes []fieldCause
	// rewritten are the spec fields whose text is not the object's as
	// written (TextRewritten): its lines are not the file's.
	rewritten []string
}

// TextRewritten says that the spec field's text is not the object's field
// as written (KubeVirt's network data unwrapped from its network: key),
// so that a problem on a line of it is not placed on the file's line.
func (b *Builder) TextRewritten(specPath string) { b.rewritten = append(b.rewritten, specPath) }

type fieldCause struct {
	field string
	cause error
}

// NewBuilder starts converting doc into an instance named name.
func NewBuilder(doc *Document, name string) *Builder {
	b := &Builder{Doc: doc}
	b.Instance.APIVersion = spec.APIVersion
	b.Instance.Kind = spec.Kind
	b.Instance.Metadata.Name = name
	return b
}

// Errorf records a problem with the object's field at path.
func (b *Builder) Errorf(path, format string, args ...any) {
	b.errs = append(b.errs, b.Doc.Error(path, fmt.Sprintf(format, args...)))
}

// Err records err, a problem with the object's field at path: field errors
// keep their own fields (they already name the object's), anything else
// becomes a message for path that errors.Is still matches.
func (b *Builder) Err(path string, err error) {
	if es := spec.AsErrors(err); es != nil {
		for _, e := range es {
			if e.Object == "" {
				e.Object = b.Doc.Object()
			}
		}
		b.errs = append(b.errs, es...)
		return
	}
	e := b.Doc.Error(path, err.Error())
	e.Cause = err
	b.errs = append(b.errs, e)
}

// TextErrorf records a problem at line and column (1-based) of the text
// held by the object's field at path (an embedded JSON config, say): at
// the file's line and column when the field's text keeps the file's lines,
// else at the field, naming the text's line and column.
func (b *Builder) TextErrorf(path string, line, col int, format string, args ...any) {
	b.errs = append(b.errs, b.textProblem(path, line, col, fmt.Sprintf(format, args...)))
}

// TextWarnf records a warning at line and column of the text held by the
// object's field at path, placed as TextErrorf places problems.
func (b *Builder) TextWarnf(path string, line, col int, format string, args ...any) {
	b.Warnings = append(b.Warnings, b.textProblem(path, line, col, fmt.Sprintf(format, args...)).Error())
}

func (b *Builder) textProblem(path string, line, col int, msg string) *spec.FieldError {
	fl, fc, ok := b.Doc.TextPosition(path, line, col)
	switch {
	case ok && fc > 0:
		msg = fmt.Sprintf("column %d: %s", fc, msg)
	case ok:
	default:
		fl = b.Doc.LineOf(path)
		msg = fmt.Sprintf("line %d, column %d of its text: %s", line, col, msg)
	}
	e := b.Doc.Error(path, msg)
	e.Line = fl
	return e
}

// Warnf records a warning about the object's field at path.
func (b *Builder) Warnf(path, format string, args ...any) {
	b.Warnings = append(b.Warnings, fmt.Sprintf("%s: %s", b.Doc.Where(path), fmt.Sprintf(format, args...)))
}

// WarnCause records, as Warnf, a warning about the object's field at path
// that is, in the instance, the problem cause with the spec field
// specPath: a check that finds it there later says the same without the
// platform's terms, and Result.Locate drops that.
func (b *Builder) WarnCause(specPath string, cause error, path, format string, args ...any) {
	b.Warnf(path, format, args...)
	b.causes = append(b.causes, fieldCause{specPath, cause})
}

// warnedOf reports whether e is a problem WarnCause has warned of.
func (b *Builder) warnedOf(e *spec.FieldError) bool {
	return slices.ContainsFunc(b.causes, func(c fieldCause) bool {
		return e.Field == c.field && errors.Is(e, c.cause)
	})
}

// From records that the spec field specPath (and what is under it) came
// from the object's field objectPath.
func (b *Builder) From(specPath, objectPath string) {
	b.origins = append(b.origins, [2]string{specPath, objectPath})
}

// HasErrors reports whether a problem has been recorded.
func (b *Builder) HasErrors() bool { return len(b.errs) > 0 }

// Finish renders the instance as a spec document, loads it back with
// spec.Parse and returns the Result; every problem found, during the
// conversion and by the spec's validation, comes back together.
func (b *Builder) Finish(object string) (*Result, error) {
	if len(b.errs) > 0 {
		return nil, b.errs
	}
	doc, err := MarshalSpec(&b.Instance)
	if err != nil {
		return nil, err
	}
	inst, err := spec.Parse(doc, ".")
	if err != nil {
		es := spec.AsErrors(err)
		if es == nil {
			return nil, err
		}
		out := make(spec.Errors, len(es))
		for i, e := range es {
			out[i] = b.translate(e)
		}
		return nil, out
	}
	return &Result{Object: object, Instance: inst, Spec: doc, Warnings: b.Warnings, builder: b}, nil
}

// translate names the object's field for a problem the spec's validation
// found in a field the conversion filled from it.
func (b *Builder) translate(e *spec.FieldError) *spec.FieldError {
	best := -1
	for i, o := range b.origins {
		if (e.Field == o[0] || strings.HasPrefix(e.Field, o[0]+".") || strings.HasPrefix(e.Field, o[0]+"[")) && (best < 0 || len(o[0]) > len(b.origins[best][0])) {
			best = i
		}
	}
	if best < 0 {
		return b.Doc.Error("", fmt.Sprintf("as the vminit spec, %s: %s", e.Field, e.Message))
	}
	o := b.origins[best]
	at := o[1]
	// The spec's field below the one filled (spec.users[0] ->
	// sshAuthorizedKeys[1]) is, where the object spells it the same, the
	// object's own: its line is the problem's, not its parent's.
	if rest := e.Field[len(o[0]):]; rest != "" {
		if _, n := b.Doc.find(o[1] + rest); n != nil {
			at = o[1] + rest
		}
	}
	t := b.Doc.Error(at, fmt.Sprintf("%s (vminit %s)", e.Message, e.Field))
	// A problem inside the text the field holds (its network data's
	// config[0]) is on that line of the file, when the field keeps the
	// text's lines.
	if e.TextLine > 0 && at == o[1] && !slices.Contains(b.rewritten, o[0]) {
		if fl, _, ok := b.Doc.TextPosition(at, e.TextLine, 1); ok {
			t.Line = fl
		}
	}
	return t
}

// MarshalSpec writes inst as a spec document: YAML, fields in the spec's
// order, multi-line strings as literal blocks.
func MarshalSpec(inst *spec.Instance) ([]byte, error) {
	var n yaml.Node
	if err := n.Encode(inst); err != nil {
		return nil, err
	}
	literalBlocks(&n)
	var sb strings.Builder
	enc := yaml.NewEncoder(&sb)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return []byte(sb.String()), nil
}

// literalBlocks makes multi-line strings literal blocks, which read back
// exactly (yaml.v3 keeps the trailing newlines with |, |- or |+).
func literalBlocks(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && strings.Contains(n.Value, "\n") && literalSafe(n.Value) {
		n.Style = yaml.LiteralStyle
	}
	for _, c := range n.Content {
		literalBlocks(c)
	}
}

// literalSafe reports whether s survives a literal block: no trailing
// spaces on a line, no tabs or control characters, no leading space on
// the first line.
func literalSafe(s string) bool {
	if strings.HasPrefix(s, " ") || strings.HasPrefix(s, "\n") {
		return false
	}
	for _, l := range strings.Split(s, "\n") {
		if strings.HasSuffix(l, " ") || strings.HasSuffix(l, "\t") {
			return false
		}
		if strings.ContainsFunc(l, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f || r == 0xfeff }) {
			return false
		}
	}
	return true
}

// The kinds of referenced objects, as Fetch, Resolver.Data and messages
// spell them.
const (
	KindSecret    = "secret"
	KindConfigMap = "configmap"
)

// Resolver finds the Secrets and ConfigMaps objects refer to. Data
// returns the entries of the Secret (KindSecret) or ConfigMap
// (KindConfigMap) namespace/name, text and binary entries merged as the API
// server merges them (refs.SecretData, refs.ConfigMapData), or an error
// matching ErrNotFound when the object does not exist.
//
// It speaks in plain maps, not Kubernetes' API types, so that a platform
// that never refers to a Secret (oVirt) does not link them: platform/refs
// holds Secrets and ConfigMaps given as documents, platform/cluster reads
// them from a cluster.
type Resolver interface {
	Data(ctx context.Context, kind, namespace, name string) (map[string][]byte, error)
}

// Chain is a Resolver trying each resolver in turn: the first that has the
// object answers.
type Chain []Resolver

// Data implements Resolver.
func (c Chain) Data(ctx context.Context, kind, ns, name string) (map[string][]byte, error) {
	for _, r := range c {
		if r == nil {
			continue
		}
		data, err := r.Data(ctx, kind, ns, name)
		if err == nil || !errors.Is(err, ErrNotFound) {
			return data, err
		}
	}
	return nil, ErrNotFound
}

// Source is the data of a referenced Secret or ConfigMap.
type Source struct {
	Kind      string // KindSecret or KindConfigMap
	Namespace string
	Name      string
	Data      map[string][]byte
}

// Keys returns the source's keys in sorted order.
func (s *Source) Keys() []string {
	keys := make([]string, 0, len(s.Data))
	for k := range s.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Key returns the first of keys the source has, or an error matching
// ErrMissingKey naming them all.
func (s *Source) Key(keys ...string) (string, []byte, error) {
	for _, k := range keys {
		if v, ok := s.Data[k]; ok {
			return k, v, nil
		}
	}
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = fmt.Sprintf("%q", k)
	}
	have := s.Keys()
	return "", nil, &refError{fmt.Sprintf("%s %q in namespace %q has no key %s (it has %s)", s.Kind, s.Name, s.Namespace, strings.Join(quoted, " or "), describeKeys(have)), ErrMissingKey}
}

func describeKeys(keys []string) string {
	if len(keys) == 0 {
		return "none"
	}
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(q, ", ")
}

// Fetch gets the Secret (KindSecret) or ConfigMap (KindConfigMap) a
// field refers to. The error says, for the reference's field, what is
// missing: `secret "ud" not found in namespace "default"`.
func Fetch(ctx context.Context, r Resolver, kind, namespace, name string) (*Source, error) {
	if r == nil {
		r = Chain{}
	}
	if kind != KindSecret && kind != KindConfigMap {
		return nil, fmt.Errorf("platform: unknown kind %q", kind)
	}
	data, err := r.Data(ctx, kind, namespace, name)
	if err != nil {
		return nil, notFound(err, kind, namespace, name)
	}
	return &Source{Kind: kind, Namespace: namespace, Name: name, Data: data}, nil
}

// FetchKey is Fetch and Source.Key in one: the value of key in the
// referenced object. The error matches ErrNotFound when the object is
// missing and ErrMissingKey when the key is.
func FetchKey(ctx context.Context, r Resolver, kind, namespace, name, key string) ([]byte, error) {
	src, err := Fetch(ctx, r, kind, namespace, name)
	if err != nil {
		return nil, err
	}
	_, v, err := src.Key(key)
	return v, err
}

func notFound(err error, kind, ns, name string) error {
	if errors.Is(err, ErrNotFound) {
		return &refError{fmt.Sprintf("%s %q not found in namespace %q", kind, name, ns), ErrNotFound}
	}
	return fmt.Errorf("reading %s %q in namespace %q: %w", kind, name, ns, err)
}

// refError is a reference problem: its own message, matching a sentinel.
type refError struct {
	msg   string
	cause error
}

func (e *refError) Error() string { return e.msg }
func (e *refError) Unwrap() error { return e.cause }
