package mdserver

import (
	"fmt"

	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/render"
	"github.com/vminit/vminit/spec"
)

// StoreChecks are the checks a store must run on every record it serves
// to a handler with opts (dirstore.Options.Checks,
// etcdstore.Config.Checks, kubestore.Config.Checks): what the spec's own validation cannot know.
//
//   - Content: the checks of `vminit validate` (package render) for the
//     output the handler renders: the user's Ignition config parses (a
//     truncated or 100,000-deep config would otherwise be a 500 in every
//     dialect), the seed renders, the Ignition variant the handler forces.
//     A cloud-config's schema findings are warnings, as for `vminit build`
//     and for cloud-init itself.
//   - Policy: no address the handler would never identify the instance by,
//     or would hand its data to someone else for: a loopback address
//     (every process of the server's host) unless
//     opts.AllowLoopbackInstances, an address inside a trusted proxy's
//     network (the proxy's own requests).
//
// A record that fails them is not served, and its last good version stays
// (registry.Checks).
func StoreChecks(opts Options) registry.Checks {
	return registry.Checks{
		Content: func(rec *registry.Record) error {
			r := render.Instance(rec.Instance(), render.Target{Variant: opts.IgnitionVariant, AllowPartial: true, LenientSchema: true, VerdictOnly: true})
			if !r.OK() {
				return r.Errors
			}
			return nil
		},
		Policy: func(rec *registry.Record) error { return addressPolicy(opts, rec) },
	}
}

func addressPolicy(opts Options, rec *registry.Record) error {
	var errs spec.Errors
	for i, a := range rec.Addresses {
		field := fmt.Sprintf("spec.metadataServer.addresses[%d]", i)
		if a.IsLoopback() && !opts.AllowLoopbackInstances {
			errs = append(errs, &spec.FieldError{Field: field, Message: fmt.Sprintf(
				"%s is a loopback address: every process of the server's host would get this instance's data; give the address the VM's requests come from (loopback instances are for tests and QEMU user-mode networking: vminit serve --allow-loopback-instances)", a)})
		}
		for _, p := range opts.TrustedProxies {
			if p.Contains(a) {
				errs = append(errs, &spec.FieldError{Field: field, Message: fmt.Sprintf(
					"%s is inside trusted proxy network %s: a trusted proxy's requests are identified by the instance they name, never by its own address; give the VM's address, outside --trusted-proxy", a, p)})
				break
			}
		}
	}
	if errs != nil {
		return errs
	}
	return nil
}
