// Package convert recognises platform objects by their apiVersion and kind
// (oVirt's REST representations by their shape) and converts each with its
// platform's package. It is the one place that knows every platform, and
// reads a file's documents as kubectl apply takes them (kinds.go): other
// kinds beside the VMs skipped with a note, v1 Lists and workloads of
// Virtlet pods read as what they hold, one object picked by --object.
package convert

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/capi"
	"github.com/vminit/vminit/platform/kubevirt"
	"github.com/vminit/vminit/platform/ovirt"
	"github.com/vminit/vminit/platform/refs"
	"github.com/vminit/vminit/platform/virtlet"
	"github.com/vminit/vminit/spec"
)

// Converter converts one platform object.
type Converter func(ctx context.Context, doc *platform.Document, opts platform.Options) (*platform.Result, error)

// For returns the converter of doc's platform, or nil when doc is no
// platform object (a vminit Instance, a Secret or ConfigMap, or unknown).
func For(doc *platform.Document) Converter {
	switch {
	case kubevirt.Recognizes(doc.APIVersion, doc.Kind):
		return kubevirt.Convert
	case virtlet.Recognizes(doc.APIVersion, doc.Kind):
		return virtlet.Convert
	case capi.Recognizes(doc.APIVersion, doc.Kind):
		return capi.Convert
	case ovirt.Recognizes(doc):
		return ovirt.Convert
	}
	return nil
}

// IsInstance reports whether doc is a vminit spec.
func IsInstance(doc *platform.Document) bool {
	return doc.Format == platform.YAML && strings.HasPrefix(doc.APIVersion, "vminit.dev/")
}

// IsSpecFile reports whether docs, a file's documents, are one vminit
// spec: every other file is read as platform objects, and one holding
// nothing vminit reads is reported with its kind (never decoded as a spec).
func IsSpecFile(docs []*platform.Document) bool {
	return len(docs) == 0 || len(docs) == 1 && IsInstance(docs[0])
}

// Documents converts the platform objects among docs (opts.Object's
// alone when it names one): those of the platforms' kinds, the items of a
// v1 List, and the Virtlet pods that Deployments, StatefulSets, ReplicaSets
// and DaemonSets hold. The Secrets and ConfigMaps among docs are found
// first, then opts.Resolver's. Documents of other kinds beside them
// (Namespaces, Services, volumes, instancetypes, a Cluster API cluster's
// other objects) are skipped with a warning on each result, as kubectl
// apply would create them and the VM's first boot does not read them;
// docs holding nothing vminit reads are an error naming the first kind.
// A vminit Instance among them is an error, as is, with opts.Confined,
// an object in another namespace than opts.Namespace.
func Documents(ctx context.Context, docs []*platform.Document, opts platform.Options) ([]*platform.Result, error) {
	var s sorted
	s.sort(docs, opts, 0)
	if len(s.objects) == 0 && len(s.others) > 0 {
		s.errs = append(s.errs, unknown(s.others[0]))
	}
	if len(s.errs) > 0 {
		return nil, s.errs
	}
	if err := s.pick(opts.Object); err != nil {
		return nil, err
	}
	local := &refs.Objects{Namespace: opts.Namespace}
	var errs spec.Errors
	for _, d := range s.refs {
		if err := local.Add(d); err != nil {
			errs = append(errs, spec.AsErrors(err)...)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	opts.Resolver = platform.Chain{local, opts.Resolver}
	// The Cluster API Machines beside a KubeadmConfig say its machine's
	// role, as the Machine does to CABPK, and the Cluster whether its
	// control plane is initialized.
	for _, d := range s.others {
		if m, ok := platform.ReadMachine(d.JSON); ok {
			m.Namespace = opts.NamespaceOf(m.Namespace)
			m.Where = d.Where(`metadata.labels["` + platform.LabelControlPlane + `"]`)
			opts.Machines = append(opts.Machines, m)
		}
		if c, ok := platform.ReadCluster(d.JSON); ok {
			c.Namespace = opts.NamespaceOf(c.Namespace)
			c.Where = d.Where("metadata.name")
			if c.Status {
				c.Where = d.Where("status")
			}
			opts.Clusters = append(opts.Clusters, c)
		}
	}
	var out []*platform.Result
	for _, o := range s.objects {
		if e := nameProblem(o.doc); e != nil {
			errs = append(errs, e)
			continue
		}
		r, err := For(o.doc)(ctx, o.doc, opts)
		if err != nil {
			if es := spec.AsErrors(err); es != nil {
				errs = append(errs, es...)
				continue
			}
			return nil, err
		}
		r.Warnings = append(r.Warnings, s.skipNotes()...)
		// An oVirt body has no kind: its place is its first line.
		r.Key, r.Where, r.Doc = o.key, fmt.Sprintf("%s:%d", o.doc.File, cmp.Or(o.doc.LineOf("kind"), o.doc.Line)), o.doc
		out = append(out, r)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// maxSkipNotes bounds the notes of skipped documents: a List of thousands
// of Services gets a count, not thousands of lines on every result.
const maxSkipNotes = 20

// skipNotes are the warnings of the documents skipped, and of those read
// as what they hold.
func (s *sorted) skipNotes() []string {
	notes := slices.Clone(s.notes)
	for i, d := range s.others {
		if i == maxSkipNotes {
			notes = append(notes, fmt.Sprintf("%d more documents skipped", len(s.others)-i))
			break
		}
		if m, ok := platform.ReadMachine(d.JSON); ok && m.Config != "" {
			notes = append(notes, fmt.Sprintf("%s: %s read for the role of its KubeadmConfig %q (%s)", d.Where("kind"), what(d), m.Config, map[bool]string{true: "a control-plane machine", false: "a worker"}[m.ControlPlane]))
			continue
		}
		if c, ok := platform.ReadCluster(d.JSON); ok {
			notes = append(notes, fmt.Sprintf("%s: %s read for whether its control plane is initialized (%s), which decides whether its control-plane machines init it or join it", d.Where("kind"), what(d), map[bool]string{true: "it is", false: "it is not"}[c.Initialized]))
			continue
		}
		notes = append(notes, fmt.Sprintf("%s: %s skipped: it holds no VM first-boot data vminit reads", d.Where("kind"), what(d)))
	}
	return notes
}

// Read converts the platform objects in data, the text of a file named
// name (as kubectl apply -f takes it: the VMs and the Secrets and
// ConfigMaps they refer to), with Split and Documents.
func Read(ctx context.Context, name string, data []byte, opts platform.Options) ([]*platform.Result, error) {
	docs, err := platform.Split(name, data)
	if err != nil {
		return nil, err
	}
	return Documents(ctx, docs, opts)
}

// what names d's kind for a message.
func what(d *platform.Document) string {
	switch {
	case d.APIVersion == "" && d.Kind == "":
		return "a document without apiVersion and kind"
	case d.APIVersion == "":
		return "kind " + d.Kind
	}
	s := fmt.Sprintf("%s %s", d.APIVersion, d.Kind)
	if d.Name != "" {
		s += fmt.Sprintf(" %q", d.Name)
	}
	return s
}

func unknown(d *platform.Document) *spec.FieldError {
	e := d.Error("kind", fmt.Sprintf("%s is not an object vminit reads: %s", what(d), readKinds))
	e.Cause = platform.ErrUnknownKind
	return e
}
