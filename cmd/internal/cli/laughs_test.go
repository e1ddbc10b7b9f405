package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/laughs"
)

// allocatedBy runs vminit with args (within runWithin's bound) and
// returns its exit, its standard error and the bytes it allocated.
func allocatedBy(t *testing.T, args ...string) (int, string, uint64) {
	t.Helper()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	code, _, stderr := runWithin(t, args...)
	runtime.ReadMemStats(&after)
	return code, stderr, after.TotalAlloc - before.TotalAlloc
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestValidateLaughs: the issue's attack (a 100 KB scalar aliased 100×100
// times, 1 GB expanded) in spec.cloudInit.userData, and the same aliases
// in the spec itself, are refused naming the field and the alias's line,
// within the 1 GB bound, where validate took 54 s and 5.9 GB and called
// the spec valid.
func TestValidateLaughs(t *testing.T) {
	const head = "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: a}\nspec:\n"
	userData := head + "  cloudInit:\n    userData: |\n" + indent(laughs.Issue(), "      ")
	inSpec := head + "  cloudInit:\n    metaData:\n" + laughs.Mapping(6, laughs.IssueScalar, laughs.IssueWidth)
	for _, tc := range []struct{ name, doc, want string }{
		{"userData", userData, "a.yaml:6: spec.cloudInit.userData: #cloud-config line 4: aliases expand the document past 16777216 bytes at bootcmd[0]"},
		{"spec", inSpec, "a.yaml:9: spec.cloudInit.metaData.c[0]: aliases expand the document past 16777216 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr, alloc := allocatedBy(t, "validate", writeTemp(t, "a.yaml", tc.doc))
			t.Logf("validate of %d bytes: exit %d, %d MB allocated", len(tc.doc), code, alloc>>20)
			if code != ExitInvalid || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, want %d and %q:\n%s", code, ExitInvalid, tc.want, stderr)
			}
			if alloc > 1<<30 {
				t.Errorf("validate allocated %d MB; the bound is 1024", alloc>>20)
			}
		})
	}
}

func indent(s, pad string) string {
	return pad + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+pad) + "\n"
}

// TestConvertLaughs: convert of the issue's cloud-config is refused naming
// the alias's line, within the 1 GB bound, for either target.
func TestConvertLaughs(t *testing.T) {
	p := writeTemp(t, "user-data", laughs.Issue())
	for _, to := range []string{"spec", "ignition"} {
		code, stderr, alloc := allocatedBy(t, "convert", p, "--to", to, "-o", filepath.Join(t.TempDir(), "out"))
		const want = "#cloud-config line 4: aliases expand the document past 16777216 bytes at bootcmd[0]"
		if code != ExitInvalid || !strings.Contains(stderr, want) {
			t.Errorf("--to %s: exit %d, want %d and %q:\n%s", to, code, ExitInvalid, want, stderr)
		}
		if alloc > 1<<30 {
			t.Errorf("--to %s allocated %d MB; the bound is 1024", to, alloc>>20)
		}
	}
}

// TestPlatformListLimit: the list limit of a spec holds for the lists of
// platform objects, before they are converted: a KubeVirt VM with 200,000
// volumes (22 s and 1.3 GB, and valid, before) and a KubeadmConfig with
// 20,000 commands are refused naming the list and its line.
func TestPlatformListLimit(t *testing.T) {
	for _, tc := range []struct {
		file, list, entry string
		n                 int
		want              string
	}{
		{"kubevirt-configdrive.yaml", "      volumes:\n", "      - name: v%d\n        emptyDisk: {capacity: 1Gi}\n", 200_000,
			"vm.yaml:39: spec.template.spec.volumes: more than 10000 entries"},
		{"capi-kubeadmconfig.yaml", "  preKubeadmCommands:\n", "  - echo %d\n", 20_000,
			"vm.yaml:30: spec.preKubeadmCommands: more than 10000 entries"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("../../../platform/testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for i := range tc.n {
				fmt.Fprintf(&b, tc.entry, i)
			}
			doc := strings.Replace(string(data), tc.list, tc.list+b.String(), 1)
			code, stderr, alloc := allocatedBy(t, "validate", writeTemp(t, "vm.yaml", doc))
			t.Logf("validate of %d bytes: exit %d, %d MB allocated", len(doc), code, alloc>>20)
			if code != ExitInvalid || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, want %d and %q:\n%s", code, ExitInvalid, tc.want, stderr)
			}
			if alloc > 1<<30 {
				t.Errorf("validate allocated %d MB; the bound is 1024", alloc>>20)
			}
		})
	}
}

// TestDenseUserData: user data of 1,000,000 one-letter list entries (2 MB,
// no alias) is refused at yamlbound.MaxNodes naming the field, by validate
// and by convert, within the 1 GB bound, where validate took 45 s and 4.9
// GB for four times as many.
func TestDenseUserData(t *testing.T) {
	userData := "#cloud-config\nbootcmd: [" + strings.Repeat("x,", 1_000_000) + "x]\n"
	spec := "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: a}\nspec:\n  cloudInit:\n    userData: |\n" + indent(userData, "      ")
	const want = "line 2: the document holds more than 100000 values (keys, entries, aliases counted as what they stand for) at bootcmd[99996]"
	for _, args := range [][]string{
		{"validate", writeTemp(t, "a.yaml", spec)},
		{"convert", writeTemp(t, "user-data", userData), "--to", "spec", "-o", filepath.Join(t.TempDir(), "out")},
	} {
		code, stderr, alloc := allocatedBy(t, args...)
		t.Logf("%s: exit %d, %d MB allocated", args[0], code, alloc>>20)
		if code != ExitInvalid || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, want %d and %q:\n%s", args[0], code, ExitInvalid, want, stderr)
		}
		if args[0] == "validate" && !strings.Contains(stderr, "a.yaml:6: spec.cloudInit.userData: #cloud-config "+want) {
			t.Errorf("validate does not name the field and its line:\n%s", stderr)
		}
		if alloc > 1<<30 {
			t.Errorf("%s allocated %d MB; the bound is 1024", args[0], alloc>>20)
		}
	}
}
