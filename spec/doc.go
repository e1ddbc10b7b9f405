// Package spec defines vminit's instance spec: the one declarative document
// (apiVersion vminit.dev/v1alpha1, kind Instance) that describes a virtual
// machine's first boot, and that the renderers turn into cloud-init and
// Ignition data with the same meaning.
//
// Load reads a spec file strictly (an unknown or misspelled field is an
// error with its line), resolves the files it references, fills in defaults
// and validates every field. Problems come back together as Errors, each
// naming its field (spec.users[0].sshAuthorizedKeys[1]) and line, so a user
// fixes them in one pass.
//
// Defaults are deterministic: the hostname and the instance-id derive from
// metadata.name, never from a clock or a random source, because cloud-init
// re-runs first boot whenever the instance-id changes.
package spec
