package kubevirt_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/convert"
	"github.com/vminit/vminit/spec"
)

// FuzzConvert feeds arbitrary files of KubeVirt objects (and the Secrets
// and ConfigMaps beside them) to the conversion: it must not panic, its
// problems must be field errors within the file, and what it accepts must
// load back as a spec and convert the same twice.
func FuzzConvert(f *testing.F) {
	ps, _ := filepath.Glob("../testdata/kubevirt-*.yaml")
	for _, p := range ps {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(vm("hostname: a\naccessCredentials:\n- sshPublicKey: {source: {secret: {secretName: k}}, propagationMethod: {noCloud: {}}}\nvolumes:\n- name: ci\n  cloudInitNoCloud: {userDataBase64: "+gzipB64("#!/bin/sh\n")+"}\n", secret("k", "a", keyA+"\n"+keyB))))
	f.Add([]byte(strings.Replace(vm(""), "  template:\n", "  template:\n    metadata: {annotations: {kubevirt.io/ignitiondata: '{\"ignition\": {\"version\": \"2.3.0\"}}'}}\n", 1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		// Line breaks as YAML counts them: CR LF, LF, or a CR alone.
		lines := strings.Count(string(data), "\n") + strings.Count(string(data), "\r") - strings.Count(string(data), "\r\n") + 1
		conv := func() ([]*platform.Result, error) {
			return convert.Read(context.Background(), "vm.yaml", data, platform.Options{PoolIndex: 1})
		}
		rs, err := conv()
		if err != nil {
			var es spec.Errors
			if !errors.As(err, &es) {
				if errors.Is(err, platform.ErrUnsupported) || strings.Contains(err.Error(), "the limit is") {
					return
				}
				t.Fatalf("not field errors: %v", err)
			}
			for _, e := range es {
				if e.Line > lines {
					t.Fatalf("line %d of %d: %v", e.Line, lines, e)
				}
			}
			return
		}
		rs2, err := conv()
		if err != nil || len(rs2) != len(rs) {
			t.Fatalf("a second conversion differs: %v", err)
		}
		for i, r := range rs {
			if r.Spec == nil {
				continue // a sysprep disc alone
			}
			if _, err := spec.Parse(r.Spec, "."); err != nil {
				t.Fatalf("the spec does not load back: %v\n%s", err, r.Spec)
			}
			if string(rs2[i].Spec) != string(r.Spec) {
				t.Fatalf("a second conversion differs:\n%s\n%s", r.Spec, rs2[i].Spec)
			}
		}
	})
}
