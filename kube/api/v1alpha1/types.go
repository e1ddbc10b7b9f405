package v1alpha1

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vminit/vminit/spec"
)

// The API's group, version, kind and resource.
const (
	Group    = "vminit.dev"
	Version  = "v1alpha1"
	Kind     = "Instance"
	Resource = "instances"
)

var (
	// SchemeGroupVersion is vminit.dev/v1alpha1.
	SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: Version}
	// GroupVersionResource is the Instance resource, for dynamic clients.
	GroupVersionResource = SchemeGroupVersion.WithResource(Resource)
	// GroupVersionKind is the Instance kind.
	GroupVersionKind = SchemeGroupVersion.WithKind(Kind)

	schemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &Instance{}, &InstanceList{})
		metav1.AddToGroupVersion(s, SchemeGroupVersion)
		return nil
	})
	// AddToScheme adds the types to a scheme, for typed clients.
	AddToScheme = schemeBuilder.AddToScheme
)

// AnnotationInstance, on a KubeVirt VirtualMachine (or its template, and
// so its VirtualMachineInstance), names the Instance in the same namespace
// whose first-boot data the VM gets.
const AnnotationInstance = "vminit.dev/instance"

// The KubeVirt resources that carry AnnotationInstance: the metadata
// server's Kubernetes store reads both (their addresses, the Instance they
// name), and the controller writes the VirtualMachines' first-boot
// Secrets. They live beside the annotation so that neither reader reaches
// into the other for them.
var (
	KubeVirtVirtualMachineInstances = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}
	KubeVirtVirtualMachines         = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}
)

// InstanceNamedBy is the name of the Instance (in obj's namespace) that a
// KubeVirt object names with AnnotationInstance, "" for none: its own
// annotation, else, for a VirtualMachine, its template's. KubeVirt copies
// the template's annotations to the VirtualMachineInstances it starts, so
// a template annotated after its VMI started still speaks for the VM. The
// controller (which VM's Secret follows which Instance) and the metadata
// server's Kubernetes store (whose addresses are whose) both ask this.
func InstanceNamedBy(obj *unstructured.Unstructured) string {
	if n := obj.GetAnnotations()[AnnotationInstance]; n != "" {
		return n
	}
	ann, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "template", "metadata", "annotations")
	return ann[AnnotationInstance]
}

// The condition types of InstanceStatus.
const (
	// ConditionValid is True when the spec passes every check `vminit
	// validate` runs; its message lists every problem, each with its
	// field path.
	ConditionValid = "Valid"
	// ConditionRendered is True when the outputs for the spec's agent
	// rendered (status.outputs lists them).
	ConditionRendered = "Rendered"
	// ConditionServed is True when the metadata server serves this version
	// (no other Instance holds its name or an address).
	ConditionServed = "Served"
	// ConditionFirstBoot is the metadata server's word on the first boot
	// of the guest it serves (status.firstBoot): True when it is done,
	// False when it failed, Unknown while it is pending, fetched, running
	// or stalled, and for good when its agent sends no report
	// (cloudbase-init). Its reason is one of the Reason* below; its
	// message the stage and module the boot is in, or its first error, or
	// why the server cannot tell (ReasonNoReport). The server
	// writes it under its own field manager (FieldManagerServer), the
	// controller never does.
	ConditionFirstBoot = "FirstBoot"
)

// The FirstBoot condition's reasons, one per state of the boot, and
// NoReport for a boot the server cannot follow: its agent sends no
// report (spec.ReportsFirstBoot), so it is never done, failed or stalled
// as far as the server knows (the message names the agent).
const (
	ReasonPending  = "Pending"
	ReasonFetched  = "Fetched"
	ReasonRunning  = "Running"
	ReasonStalled  = "Stalled"
	ReasonDone     = "Done"
	ReasonFailed   = "Failed"
	ReasonNoReport = "NoReport"
)

// ReasonFirstBootFailed is the reason of the Warning Event the metadata
// server records, once per incarnation, when an Instance's first boot
// fails; its message is the first error.
const ReasonFirstBootFailed = "FirstBootFailed"

// FieldManagerServer is the field manager the metadata server applies
// status.firstBoot and the FirstBoot condition with (server-side apply):
// the controller's fields and these never clobber each other.
const FieldManagerServer = "vminit-server"

// ReasonMissingReference is the Valid condition's reason when a Secret or
// ConfigMap the spec refers to (secretKeyRef, configMapKeyRef), or its
// key, does not exist in the Instance's namespace; the message names it
// and the field. Creating it renders the Instance.
const ReasonMissingReference = "MissingReference"

// Instance is one virtual machine's first-boot configuration as a
// Kubernetes object.
//
// +kubebuilder:object:root=true
// +kubebuilder:object:generate=false
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=vminit
// +kubebuilder:printcolumn:name="Hostname",type=string,JSONPath=`.status.hostname`
// +kubebuilder:printcolumn:name="Agent",type=string,JSONPath=`.status.agent`
// +kubebuilder:printcolumn:name="Valid",type=string,JSONPath=`.status.conditions[?(@.type=="Valid")].status`
// +kubebuilder:printcolumn:name="Served",type=string,JSONPath=`.status.conditions[?(@.type=="Served")].status`,priority=1
// +kubebuilder:printcolumn:name="First-Boot",type=string,JSONPath=`.status.firstBoot.state`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Instance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the instance spec, as in a spec file (docs/spec.md).
	Spec spec.Spec `json:"spec"`
	// Status is written by the controller, but for firstBoot and the
	// FirstBoot condition, which the metadata server writes.
	// +optional
	Status InstanceStatus `json:"status,omitempty"`
}

// InstanceStatus is what the controller found and made of the spec.
type InstanceStatus struct {
	// ObservedGeneration is the metadata.generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Hostname and Agent are the spec's, with defaults filled in.
	// +optional
	Hostname string `json:"hostname,omitempty"`
	// +optional
	Agent string `json:"agent,omitempty"`
	// Conditions: Valid, Rendered, Served (the controller's) and
	// FirstBoot (the metadata server's).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Outputs are the rendered files, with their digests (none where
	// they carry a Secret's value: Output.FromSecret): the seed's files
	// for cloud-init, the config for Ignition.
	// +optional
	// +listType=map
	// +listMapKey=name
	Outputs []Output `json:"outputs,omitempty"`
	// VirtualMachines are the KubeVirt VirtualMachines that name this
	// Instance, and the Secret each one's first-boot data is in.
	// +optional
	// +listType=map
	// +listMapKey=name
	VirtualMachines []VirtualMachine `json:"virtualMachines,omitempty"`
	// Secrets are the Secrets the spec refers to (secretKeyRef), each with
	// the resourceVersion the controller last saw of it: the metadata
	// servers, which may read a Secret by name but not list or watch
	// Secrets, read the Instance's again when this changes.
	// +optional
	// +listType=map
	// +listMapKey=name
	Secrets []SecretVersion `json:"secrets,omitempty"`
	// FirstBoot is the first boot of this incarnation's guest, as the
	// metadata server that fed it saw it (written by the server).
	// +optional
	FirstBoot *FirstBoot `json:"firstBoot,omitempty"`
}

// FirstBoot is an Instance's first boot, as the metadata server tracks
// it (package mdserver/firstboot): where it is, and what failed. The
// stages' times and the event log stay in the servers (`vminit instances
// status NAME`): every change of an Instance goes to every watcher.
type FirstBoot struct {
	// State is pending, fetched, running, stalled, done or failed.
	State string `json:"state"`
	// Agent is cloud-init or ignition.
	// +optional
	Agent string `json:"agent,omitempty"`
	// Stage and Module are where the boot is, or ended, or failed.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Stage string `json:"stage,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Module string `json:"module,omitempty"`
	// FirstFetch is when a server first answered the guest; LastEvent
	// when one last heard of it (written again at most every minute while
	// nothing else changes); Finished when the boot ended.
	// +optional
	FirstFetch *metav1.Time `json:"firstFetch,omitempty"`
	// +optional
	LastEvent *metav1.Time `json:"lastEvent,omitempty"`
	// +optional
	Finished *metav1.Time `json:"finished,omitempty"`
	// Errors are what failed: the first ones (at most 4), each field one
	// line, a message at most 256 bytes and 1 KiB in all. The servers
	// keep the rest (vminit instances status NAME).
	// +optional
	// +kubebuilder:validation:MaxItems=4
	Errors []FirstBootError `json:"errors,omitempty"`
}

// FirstBootError is one thing that failed: a cloud-init stage and module,
// or a systemd unit of an Ignition boot, with what it said.
type FirstBootError struct {
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Stage string `json:"stage,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Module string `json:"module,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Unit string `json:"unit,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Message string `json:"message,omitempty"`
}

// Output is one rendered file.
type Output struct {
	// Name is the file's path in the seed ("user-data",
	// "openstack/latest/meta_data.json") or "config.ign".
	Name string `json:"name"`
	// SHA256 is the hex SHA-256 of the file's bytes, unless FromSecret.
	// +optional
	SHA256 string `json:"sha256,omitempty"`
	// Size is its length in bytes, unless FromSecret.
	// +optional
	Size int64 `json:"size,omitempty"`
	// FromSecret says the Instance's rendered files carry values read
	// from a Secret (secretKeyRef): then SHA256 and Size are left out.
	// Whoever may read the Instance is not whoever may read the Secret,
	// and a digest of bytes holding a short secret lets the former test
	// guesses of it offline (docs/security.md).
	// +optional
	FromSecret bool `json:"fromSecret,omitempty"`
}

// SecretVersion is a Secret of the Instance's namespace and the version
// of it the controller last saw.
type SecretVersion struct {
	// Name is the Secret's name.
	Name string `json:"name"`
	// ResourceVersion is its metadata.resourceVersion; empty when there
	// is no such Secret.
	// +optional
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// VirtualMachine is a KubeVirt VirtualMachine that names the Instance.
type VirtualMachine struct {
	// Name is the VirtualMachine's name (in the Instance's namespace).
	Name string `json:"name"`
	// Secret holds the VM's userdata and networkdata; reference it from
	// the VM's cloud-init volume (secretRef, networkDataSecretRef) unless
	// Patched.
	// +optional
	Secret string `json:"secret,omitempty"`
	// Patched is true when the controller pointed the VM at the Secret.
	// +optional
	Patched bool `json:"patched,omitempty"`
}

// InstanceList is a list of Instances.
//
// +kubebuilder:object:root=true
type InstanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Instance `json:"items"`
}

// SpecDocument returns the spec document the object stands for:
// apiVersion vminit.dev/v1alpha1, kind Instance, its name and labels, and
// its spec. Loading it (spec.Parse with no directory, or
// registry.DecodeDocument) validates it as `vminit validate` would.
func (in *Instance) SpecDocument() ([]byte, error) {
	return SpecDocumentOf(in.Name, in.Labels, &in.Spec)
}

// SpecDocumentOf is SpecDocument for an object read without these types
// (an unstructured object's name, labels and spec): the spec goes into
// the document as it is, so a field the types would not decode is
// reported by the loader with its path, not lost. The controller's node
// labels (NodeLabel) are left out: where a VM runs is not its data.
func SpecDocumentOf(name string, labels map[string]string, specValue any) ([]byte, error) {
	return json.Marshal(document{APIVersion: spec.APIVersion, Kind: spec.Kind,
		Metadata: metadata{Name: name, Labels: withoutNodeLabels(labels)}, Spec: specValue})
}

type document struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   metadata `json:"metadata"`
	Spec       any      `json:"spec"`
}

type metadata struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

// DeepCopyInto copies in into out. The spec is copied through JSON:
// spec.Spec holds free-form meta-data (map[string]any), for which
// deepcopy generators write no code, and objects are copied only to be
// changed (a status update), which is rare.
func (in *Instance) DeepCopyInto(out *Instance) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	b, err := json.Marshal(&in.Spec)
	if err == nil {
		out.Spec = spec.Spec{}
		err = json.Unmarshal(b, &out.Spec)
	}
	if err != nil {
		panic("v1alpha1: copying an Instance's spec: " + err.Error())
	}
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a deep copy.
func (in *Instance) DeepCopy() *Instance {
	if in == nil {
		return nil
	}
	out := new(Instance)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *Instance) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// FromSpec returns the Instance object for a spec: its name, labels and
// spec, as spec.Instance.ForAPI makes it. Values that the spec reads from
// files (files[].source.file and the file of a reference, which an object
// may not name) are inlined, so inst must be resolved (spec.Parse or
// Instance.Resolve); references to Secrets and ConfigMaps are kept, for
// the cluster to resolve in the object's namespace. The object's spec is
// inst's as it stands otherwise: pass a spec that spec.Default has not
// filled in (spec.Decode then Resolve) to keep the defaults out of the
// object.
func FromSpec(inst *spec.Instance) *Instance {
	api, _ := inst.ForAPI()
	return &Instance{TypeMeta: metav1.TypeMeta{APIVersion: SchemeGroupVersion.String(), Kind: Kind},
		ObjectMeta: metav1.ObjectMeta{Name: inst.Metadata.Name, Labels: inst.Metadata.Labels}, Spec: api.Spec}
}
