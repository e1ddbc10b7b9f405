// Package revindex is a reverse index of dependencies: which keys depend
// on an object. The controller keeps two (the Secrets a VM's data read;
// the Secrets and ConfigMaps an Instance refers to) and the Kubernetes
// store one, so that a changed object finds what it must render again.
// It is not safe for concurrent use: its owners hold their own locks.
package revindex

import (
	"maps"
	"slices"
)

// Index maps objects to the keys that depend on them. The zero value is
// empty and ready to use.
type Index struct {
	dependents map[string]map[string]bool // object → keys
	objects    map[string][]string        // key → objects
}

// Set records that key depends on exactly objs from now on (none: the
// key is forgotten).
func (x *Index) Set(key string, objs ...string) {
	for _, o := range x.objects[key] {
		delete(x.dependents[o], key)
		if len(x.dependents[o]) == 0 {
			delete(x.dependents, o)
		}
	}
	if len(objs) == 0 {
		delete(x.objects, key)
		return
	}
	if x.dependents == nil {
		x.dependents, x.objects = map[string]map[string]bool{}, map[string][]string{}
	}
	x.objects[key] = slices.Clone(objs)
	for _, o := range objs {
		if x.dependents[o] == nil {
			x.dependents[o] = map[string]bool{}
		}
		x.dependents[o][key] = true
	}
}

// Dependents returns the keys that depend on obj, sorted.
func (x *Index) Dependents(obj string) []string {
	return slices.Sorted(maps.Keys(x.dependents[obj]))
}

// Objects returns every object some key depends on, sorted.
func (x *Index) Objects() []string {
	return slices.Sorted(maps.Keys(x.dependents))
}
