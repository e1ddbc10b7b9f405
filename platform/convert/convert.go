// Package convert recognises platform objects by their apiVersion and kind
// (oVirt's REST representations by their shape) and converts each with its
// platform's package. It is the one place that knows every platform.
package convert

import (
	"context"
	"fmt"
	"strings"

	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/capi"
	"github.com/vminit/vminit/platform/kubevirt"
	"github.com/vminit/vminit/platform/ovirt"
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

// Documents converts the platform objects among docs. The Secrets and
// ConfigMaps among docs are found first, then opts.Resolver's. A document
// that is none of these (or a vminit Instance) is an error naming its kind;
// with opts.Confined, so is one in another namespace than opts.Namespace.
func Documents(ctx context.Context, docs []*platform.Document, opts platform.Options) ([]*platform.Result, error) {
	local := &platform.Objects{Namespace: opts.Namespace}
	var errs spec.Errors
	var todo []*platform.Document
	for _, d := range docs {
		if e := opts.CheckNamespace(d); e != nil {
			errs = append(errs, e)
			continue
		}
		switch {
		case platform.IsReferenced(d):
			if err := local.Add(d); err != nil {
				errs = append(errs, spec.AsErrors(err)...)
			}
		case For(d) != nil:
			todo = append(todo, d)
		case IsInstance(d):
			errs = append(errs, d.Error("kind", "a vminit Instance among platform objects: give it as a file of its own"))
		default:
			errs = append(errs, unknown(d))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	opts.Resolver = platform.Chain{local, opts.Resolver}
	var out []*platform.Result
	for _, d := range todo {
		r, err := For(d)(ctx, d, opts)
		if err != nil {
			if es := spec.AsErrors(err); es != nil {
				errs = append(errs, es...)
				continue
			}
			return nil, err
		}
		out = append(out, r)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
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

func unknown(d *platform.Document) *spec.FieldError {
	what := fmt.Sprintf("%s %s", d.APIVersion, d.Kind)
	if d.APIVersion == "" && d.Kind == "" {
		what = "a document without apiVersion and kind"
	}
	e := d.Error("kind", fmt.Sprintf("%s is not an object vminit reads: a vminit Instance; KubeVirt VirtualMachine, VirtualMachineInstance or VirtualMachinePool; a Virtlet Pod; an oVirt vm (XML or JSON); a Cluster API KubeadmConfig or KubeadmConfigTemplate; or a Secret or ConfigMap they refer to", what))
	e.Cause = platform.ErrUnknownKind
	return e
}
