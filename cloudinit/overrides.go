package cloudinit

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/spec"
)

// generatedFrom names, for each key CloudConfig writes, the spec fields it
// comes from.
var generatedFrom = map[string]string{
	"hostname":                  "spec.hostname",
	"fqdn":                      "spec.fqdn",
	"prefer_fqdn_over_hostname": "spec.fqdn",
	"manage_etc_hosts":          "spec.fqdn",
	"groups":                    "spec.users[].primaryGroup",
	"users":                     "spec.users",
	"write_files":               "spec.files",
	"timezone":                  "spec.timezone",
	"ntp":                       "spec.ntp",
	"packages":                  "spec.packages",
	"disk_setup":                "spec.storage.disks",
	"fs_setup":                  "spec.storage.filesystems",
	"growpart":                  "spec.storage.growRoot",
	"resize_rootfs":             "spec.storage.growRoot",
	"swap":                      "spec.storage.swap",
	"bootcmd":                   "spec.bootCommands",
	"runcmd":                    "spec.commands, spec.units, spec.mounts and spec.storage's swap filesystems",
}

// Overrides reports each key of the generated cloud-config whose value the
// user's #cloud-config (spec.cloudInit.userData) replaces when the two are
// merged: under cloud-init's default merge, dict(replace), a user's
// packages: [make] beside spec.packages: [git] leaves only make. Each
// report is a spec.FieldError on spec.cloudInit.userData naming the key,
// its line in the user-data and the spec field that is lost.
//
// User data that is not a #cloud-config document (a script, MIME) is a
// separate part that overrides nothing; it returns nil, as does a merge
// that keeps or extends every generated value (merge_how with
// list(append), for example). inst must be defaulted and valid.
func Overrides(inst *spec.Instance) (spec.Errors, error) {
	user, err := gunzip([]byte(inst.Spec.CloudInit.UserData))
	if err != nil || PartType(user) != TypeCloudConfig || isMIME(user) {
		return nil, nil
	}
	overlay, err := normalize(user)
	if err != nil || overlay == nil || lookup(overlay, "launch-index") != nil {
		return nil, nil // not merged (Combine reports a broken document)
	}
	gen, err := cloudConfig(inst)
	if err != nil {
		return nil, err
	}
	merged, err := mergeDocs(gen, overlay)
	if err != nil {
		return nil, nil
	}
	var out spec.Errors
	for i := 0; i+1 < len(gen.Content); i += 2 {
		key := gen.Content[i].Value
		mine := gen.Content[i+1]
		j := indexOfKey(overlay, "s"+key)
		if j < 0 {
			continue
		}
		theirs := overlay.Content[j+1]
		if lookup(merged, key) != theirs || sameNode(mine, theirs) {
			continue // merged, kept, or the same value
		}
		out = append(out, &spec.FieldError{Field: "spec.cloudInit.userData",
			Message: fmt.Sprintf("%s (user-data line %d) replaces the %s that %s generates: cloud-init's merge (%s) keeps only the user-data's value; put the values in the spec, or give the user-data a merge_how that appends, e.g. merge_how: 'dict(recurse_array,no_replace)+list(append)'",
				key, overlay.Content[j].Line, key, generatedFrom[key], mergeHowOf(overlay))})
	}
	return out, nil
}

// mergeHowOf names the merge rule the document asks for.
func mergeHowOf(doc *yaml.Node) string {
	for _, k := range []string{"merge_how", "merge_type"} {
		if v := lookup(doc, k); v != nil && v.Kind == yaml.ScalarNode {
			return v.Value
		}
		if v := lookup(doc, k); v != nil {
			return k + " as given"
		}
	}
	return DefaultMergeHow + ", the default"
}

// sameNode reports whether two normalized nodes hold the same value.
func sameNode(a, b *yaml.Node) bool {
	if a.Kind != b.Kind || len(a.Content) != len(b.Content) {
		return false
	}
	if a.Kind == yaml.ScalarNode {
		ka, errA := pyKey(a)
		kb, errB := pyKey(b)
		return errA == nil && errB == nil && ka == kb
	}
	for i := range a.Content {
		if !sameNode(a.Content[i], b.Content[i]) {
			return false
		}
	}
	return true
}
