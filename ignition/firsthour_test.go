package ignition

import (
	"strings"
	"testing"
)

// A typo in a Butane file's contents (inlin for inline) leaves the file
// empty on the guest: an error, not a warning.
func TestButaneTypoThatEmptiesAFileIsAnError(t *testing.T) {
	inst := load(t, "../examples/fcos-server.yaml")
	inst.Spec.Ignition.Butane = "variant: fcos\nversion: 1.4.0\nstorage:\n  files:\n    - path: /etc/motd\n      contents:\n        inlin: hello\n"
	_, err := Render(inst, Options{})
	if err == nil || !strings.Contains(err.Error(), "spec.ignition.butane: line 7 col 9: unused key inlin") || !strings.Contains(err.Error(), "/etc/motd would be empty") {
		t.Errorf("got %v", err)
	}
}

// An Ignition 2.x config in spec.ignition.config is translated to 3.0.0
// (ign-converter), as the KubeVirt and oVirt importers translate theirs.
func TestIgnitionV2ConfigIsTranslated(t *testing.T) {
	inst := load(t, "../examples/fcos-server.yaml")
	inst.Spec.Ignition.Config = `{"ignition":{"version":"2.3.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/from-v2","mode":420,"contents":{"source":"data:,v2"}}]}}`
	res, err := Render(inst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Config), `"path":"/etc/from-v2"`) || !strings.Contains(string(res.Config), `data:,v2`) {
		t.Errorf("the 2.x file is missing:\n%s", res.Config)
	}
}
