package convert

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/virtlet"
	"github.com/vminit/vminit/spec"
)

// readKinds is what vminit reads, for the message about a file holding none.
const readKinds = "a vminit Instance; KubeVirt VirtualMachine, VirtualMachineInstance or VirtualMachinePool; a Virtlet Pod (or a Deployment, StatefulSet, ReplicaSet or DaemonSet of Virtlet pods); an oVirt vm (XML or JSON); a Cluster API KubeadmConfig, KubeadmConfigTemplate, KubeadmControlPlane or KubeadmControlPlaneTemplate; a v1 List of these (oc process output); or a Secret or ConfigMap they refer to"

// maxListDepth bounds Lists held in Lists: kubectl writes none, and a
// hostile file gets no deeper walk.
const maxListDepth = 2

// object is one object vminit converts, found in a file.
type object struct {
	doc *platform.Document
	// key is KIND/NAME of the object as the file writes it (the
	// Deployment, not the pod it holds), which --object matches.
	key string
}

// sorted is what a file's documents hold, sorted for conversion.
type sorted struct {
	objects []object
	refs    []*platform.Document
	// others are the documents of kinds vminit does not read: skipped
	// with a note beside objects it reads, an error in a file of none.
	others []*platform.Document
	// notes say which objects are read as what they hold (a Deployment's pod).
	notes []string
	errs  spec.Errors
}

// sort sorts docs, unwrapping v1 Lists and Virtlet workloads.
func (s *sorted) sort(docs []*platform.Document, opts platform.Options, depth int) {
	for _, d := range docs {
		if e := opts.CheckNamespace(d); e != nil {
			s.errs = append(s.errs, e)
			continue
		}
		switch {
		case platform.IsReferenced(d):
			s.refs = append(s.refs, d)
		case For(d) != nil:
			s.objects = append(s.objects, object{doc: d, key: d.Kind + "/" + d.Name})
		case IsInstance(d):
			s.errs = append(s.errs, d.Error("kind", "a vminit Instance among platform objects: give it as a file of its own"))
		case d.Format == platform.YAML && d.APIVersion == "":
			s.errs = append(s.errs, missingAPIVersion(d))
		case isList(d) && depth < maxListDepth:
			s.sort(s.items(d), opts, depth+1)
		case isTemplate(d):
			s.errs = append(s.errs, d.Error("kind", fmt.Sprintf("%s %s is an OpenShift Template, whose objects hold ${PARAMETERS} that oc process substitutes: give vminit what `oc process -f FILE` prints (a v1 List), as OpenShift itself creates the objects only from that", d.APIVersion, d.Kind)))
		case isWorkload(d):
			s.workload(d, opts.PoolIndex)
		default:
			s.others = append(s.others, d)
		}
	}
}

// missingAPIVersion names the apiVersion a document lacks: a vminit
// Instance's, or any (kubectl refuses such an object too).
func missingAPIVersion(d *platform.Document) *spec.FieldError {
	if d.Kind == spec.Kind {
		return d.Error("apiVersion", fmt.Sprintf("required: a vminit Instance says apiVersion: %s", spec.APIVersion))
	}
	if d.Kind == "" {
		// Most often cloud-init user data that lacks its first line
		// (a cloud-localds user's first try): say what makes it
		// user data, and the commands that take it.
		return d.Error("apiVersion", "required: a document without apiVersion and kind is no object kubectl would apply, nor cloud-init user data, "+
			"which starts with #cloud-config or #! (then `vminit build USER-DATA [META-DATA] -o seed.iso` takes it as cloud-localds does, "+
			"and `vminit convert USER-DATA --to spec` makes a spec of it); vminit reads "+readKinds)
	}
	return d.Error("apiVersion", fmt.Sprintf("required: %s without an apiVersion is no object kubectl would apply; vminit reads %s", what(d), readKinds))
}

// items returns a v1 List's items as documents.
func (s *sorted) items(d *platform.Document) []*platform.Document {
	var list struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   map[string]any    `json:"metadata"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := d.Decode(&list); err != nil {
		s.errs = append(s.errs, spec.AsErrors(err)...)
		return nil
	}
	var out []*platform.Document
	for i := range list.Items {
		p, err := d.Part(fmt.Sprintf("items[%d]", i), list.Items[i], "", "")
		if err != nil {
			s.errs = append(s.errs, spec.AsErrors(err)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// workload reads a Deployment, StatefulSet, ReplicaSet or DaemonSet whose
// pod template is a Virtlet VM's as that pod, as Virtlet runs each of its
// pods; any other workload is no VM and is skipped. A StatefulSet's pods
// are named NAME-ORDINAL by Kubernetes, and Virtlet gives the VM that
// host name (the published ones tell the first from the others by it):
// ordinal is --pool-index. Other workloads' pods get random names: the
// pod is named after the workload.
func (s *sorted) workload(d *platform.Document, ordinal int) {
	var w struct {
		Spec struct {
			Template map[string]any `json:"template"`
		} `json:"spec"`
	}
	// Not strict: the workload's own fields are Kubernetes' business; the
	// pod template is decoded strictly as the pod.
	json.Unmarshal(d.JSON, &w)
	name, why := d.Name, "Kubernetes names each of its pods itself"
	if d.Kind == "StatefulSet" {
		if ordinal < 0 {
			s.errs = append(s.errs, d.Error("kind", fmt.Sprintf("--pool-index %d: a StatefulSet's pods are numbered from 0", ordinal)))
			return
		}
		name, why = fmt.Sprintf("%s-%d", d.Name, ordinal), "as Kubernetes names its pod of ordinal --pool-index"
	}
	if w.Spec.Template != nil {
		meta, _ := w.Spec.Template["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			w.Spec.Template["metadata"] = meta
		}
		if _, ok := meta["name"]; !ok {
			meta["name"] = name
		}
	}
	raw, _ := json.Marshal(w.Spec.Template)
	pod, err := d.Part("spec.template", raw, "v1", "Pod")
	if err != nil {
		s.errs = append(s.errs, spec.AsErrors(err)...)
		return
	}
	if !isVirtletPod(pod) {
		s.others = append(s.others, d)
		return
	}
	s.objects = append(s.objects, object{doc: pod, key: d.Kind + "/" + d.Name})
	s.notes = append(s.notes, fmt.Sprintf("%s: %s %s is read as its pod template, the pod named %q (%s; Virtlet gives the VM the pod's name)", d.Where("spec.template"), d.Kind, d.Name, pod.Name, why))
}

// isVirtletPod reports whether a pod (template) asks for Virtlet's runtime
// or carries its annotations.
func isVirtletPod(pod *platform.Document) bool {
	var p struct {
		Metadata struct {
			Annotations map[string]any `json:"annotations"`
		} `json:"metadata"`
	}
	if pod.Decode(&p) != nil && p.Metadata.Annotations == nil {
		return false
	}
	for k, v := range p.Metadata.Annotations {
		if strings.HasPrefix(k, "Virtlet") || k == virtlet.AnnotationRuntime && v == "virtlet.cloud" {
			return true
		}
	}
	return false
}

func isList(d *platform.Document) bool {
	return d.APIVersion == "v1" && d.Kind == "List"
}

func isTemplate(d *platform.Document) bool {
	return d.Kind == "Template" && (d.APIVersion == "v1" || d.APIVersion == "template.openshift.io/v1")
}

func isWorkload(d *platform.Document) bool {
	switch d.APIVersion {
	case "apps/v1", "apps/v1beta1", "apps/v1beta2", "extensions/v1beta1":
	default:
		return false
	}
	switch d.Kind {
	case "Deployment", "StatefulSet", "ReplicaSet", "DaemonSet":
		return true
	}
	return false
}

// pick keeps the object --object names (NAME, or KIND/NAME with the kind
// in any case), or says which there are.
func (s *sorted) pick(name string) error {
	if name == "" {
		return nil
	}
	var keys []string
	var picked []object
	for _, o := range s.objects {
		keys = append(keys, o.key)
		if o.named(name) {
			picked = append(picked, o)
		}
	}
	switch len(picked) {
	case 0:
		return fmt.Errorf("--object %s: no such object; the files hold %s", name, listOrNone(keys))
	case 1:
		s.objects = picked
		return nil
	}
	return fmt.Errorf("--object %s: names %d objects (%s); give KIND/NAME", name, len(picked), strings.Join(keysOf(picked), ", "))
}

// named reports whether --object name names o.
func (o object) named(name string) bool {
	kind, n, _ := strings.Cut(o.key, "/")
	if k, nm, ok := strings.Cut(name, "/"); ok {
		return strings.EqualFold(k, kind) && nm == n
	}
	return name == n
}

func keysOf(os []object) []string {
	out := make([]string, len(os))
	for i, o := range os {
		out[i] = o.key
	}
	return out
}

func listOrNone(keys []string) string {
	if len(keys) == 0 {
		return "no object vminit reads"
	}
	return strings.Join(keys, ", ")
}

// Contents returns KIND/NAME of each object vminit reads among docs (what
// --object names), and how many documents it skips beside them.
func Contents(docs []*platform.Document) (objects []string, skipped int) {
	var s sorted
	s.sort(docs, platform.Options{}, 0)
	return keysOf(s.objects), len(s.others)
}
