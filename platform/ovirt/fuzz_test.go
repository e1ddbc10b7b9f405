package ovirt_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/ovirt"
	"github.com/vminit/vminit/spec"
)

// FuzzConvert feeds arbitrary REST representations (XML or JSON) to the
// strict decoder and the conversion: they must not panic, problems must be
// field errors within the file (or ErrUnsupported), and a conversion must
// be the same twice.
func FuzzConvert(f *testing.F) {
	for _, pat := range []string{"../testdata/ovirt-*.xml", "../testdata/ovirt-*.json"} {
		ps, _ := filepath.Glob(pat)
		for _, p := range ps {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add([]byte(vm("    <nic_configurations><nic_configuration><name>eth0</name><boot_protocol>static</boot_protocol><ip><address>192.0.2.1</address><netmask>24</netmask></ip></nic_configuration></nic_configurations>\n", nics)))
	f.Add([]byte(`{"vm": {"os": {"type": "rhcos_x64"}, "initialization": {"custom_script": "{\"ignition\": {\"version\": \"2.2.0\"}}", "user_name": "core"}}}`))
	f.Add([]byte("<vm><initialization><custom_script>&lt;x&gt;</custom_script></initialization></vm>"))
	opts := platform.Options{PasswordSalt: "fuzz"}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		// Line breaks as YAML counts them: CR LF, LF, or a CR alone.
		lines := strings.Count(string(data), "\n") + strings.Count(string(data), "\r") - strings.Count(string(data), "\r\n") + 1
		docs, err := platform.Split("vm.xml", data)
		if err != nil || len(docs) != 1 || !ovirt.Recognizes(docs[0]) {
			return
		}
		r, err := ovirt.Convert(context.Background(), docs[0], opts)
		if err != nil {
			if errors.Is(err, platform.ErrUnsupported) {
				return
			}
			var es spec.Errors
			if !errors.As(err, &es) {
				t.Fatalf("not field errors: %v", err)
			}
			for _, e := range es {
				if e.Line > lines {
					t.Fatalf("line %d of %d: %v", e.Line, lines, e)
				}
			}
			return
		}
		docs2, _ := platform.Split("vm.xml", data)
		r2, err := ovirt.Convert(context.Background(), docs2[0], opts)
		if err != nil || string(r2.Spec) != string(r.Spec) {
			t.Fatalf("a second conversion differs: %v\n%s\n%s", err, r.Spec, r2.Spec)
		}
	})
}
