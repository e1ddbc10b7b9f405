package platform_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/convert"
	"github.com/vminit/vminit/render"
	"github.com/vminit/vminit/spec"
)

// TestErrorLinesInPublishedObjects: a problem found in a field the
// conversion filled names the line of the field it means, not its
// parent's: in CAPV's published cluster template with
// its SSH key variable given without the space after the key type, the
// error is on the key's line of each bootstrap object (295 in the
// KubeadmConfigTemplate, 255 in the KubeadmControlPlane), not on the
// user's.
func TestErrorLinesInPublishedObjects(t *testing.T) {
	dir := filepath.Join("testdata", "corpus", "capi")
	vars, err := readVarsEnv(filepath.Join(dir, "vars.env"))
	if err != nil {
		t.Fatal(err)
	}
	vars["VSPHERE_SSH_AUTHORIZED_KEY"] = strings.Replace(vars["VSPHERE_SSH_AUTHORIZED_KEY"], " ", "", 1)
	raw, err := os.ReadFile(filepath.Join(dir, "capv-cluster-template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := clusterctlSubst(raw, vars)
	if err != nil {
		t.Fatal(err)
	}
	for object, line := range map[string]int{"KubeadmConfigTemplate/corpus-md-0": 295, "KubeadmControlPlane/corpus": 255} {
		opts := capiCorpusOpts
		opts.Object = object
		_, err := convert.Read(t.Context(), "capv-cluster-template.yaml", data, opts)
		es := spec.AsErrors(err)
		if len(es) != 1 || es[0].Line != line || !strings.Contains(es[0].Field, "sshAuthorizedKeys[0]") {
			t.Errorf("%s: %v; want one error on line %d, the key's", object, err, line)
		}
	}
}

// A value of the wrong type in a list item is named with its index and
// its own line: JSON's decoder names neither (spec.files.permissions).
func TestTypeErrorLineInList(t *testing.T) {
	doc := "# source: a comment\n# another\napiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: KubeadmConfig\nmetadata:\n  name: x\nspec:\n  files:\n  - path: /a\n    permissions: \"0600\"\n  - path: /b\n    permissions: 0600\n"
	_, err := convert.Read(t.Context(), "x.yaml", []byte(doc), capiCorpusOpts)
	es := spec.AsErrors(err)
	if len(es) != 1 || es[0].Line != 12 || es[0].Field != "spec.files[1].permissions" {
		t.Errorf("%v; want spec.files[1].permissions on line 12", err)
	}
}

// A problem inside the text a field holds names the file's line of it
// when the field keeps the text's lines (a literal block): the user
// guide's elided key on line 57 of its instancetypes example, inside the
// userData block of line 53.
func TestErrorLineInsideAText(t *testing.T) {
	const file = "ug-instancetypes-L634.yaml"
	data, err := os.ReadFile(filepath.Join("testdata", "corpus", "kubevirt", file))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := convert.Read(t.Context(), file, data, platform.Options{})
	if err != nil || len(rs) != 1 {
		t.Fatalf("%d results, %v", len(rs), err)
	}
	r := render.Instance(rs[0].Instance, render.Target{})
	es := rs[0].Locate(r.Errors)
	if len(es) != 1 || es[0].Line != 57 || !strings.Contains(es[0].Message, "ssh_authorized_keys[0]: not an SSH public key") {
		t.Errorf("%v; want the key's line, 57", es)
	}
}
