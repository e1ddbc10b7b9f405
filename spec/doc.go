// Package spec defines vminit's instance spec: the one declarative document
// (apiVersion vminit.dev/v1alpha1, kind Instance) that describes a virtual
// machine's first boot, and that the renderers turn into cloud-init and
// Ignition data with the same meaning.
//
// Load reads a spec file strictly (an unknown or misspelled field is an
// error with its line), resolves the files it references, fills in defaults
// and validates every field. Fields that take a value by reference
// (refs.go: a file beside the spec, confined to its directory, or a Secret
// or ConfigMap key, read through Loader.Refs in the one namespace its
// caller chose) are filled in from it; ForAPI turns a loaded spec back
// into the document an API receiver resolves for itself. SSH host keys
// (hostkeys.go) are taken by reference only. Problems come back together as Errors, each
// naming its field (spec.users[0].sshAuthorizedKeys[1]) and line, so a user
// fixes them in one pass.
//
// Documents are parsed by yaml.v3, with one exception written by hand:
// yaml.v3 was most of the cost of loading a metadata server's 100,000 spec
// files, so documents in the plain subset of YAML that specs are written
// in take a fast path (fastyaml.go, fastdecode.go) that builds yaml.v3's
// exact node tree and decodes it without reflection. Anything outside that
// subset, and every document with a problem to report, goes through
// yaml.v3; differential fuzz tests hold the two paths to the same result.
// The one exception is a document past a spec's bounds (16 MiB, 10,000
// entries a list or mapping, 1,000,000 values: bound.go), which the fast
// path refuses as it counts, and yaml.v3 is not given.
//
// Defaults are deterministic: the hostname and the instance-id derive from
// metadata.name, never from a clock or a random source, because cloud-init
// re-runs first boot whenever the instance-id changes.
package spec
