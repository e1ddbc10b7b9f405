package render_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/render"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// TestUserDataOnlyIgnored: user data cloud-init ignores, given as the whole
// user-data (what a platform delivered: KubeVirt's quick-start "Hi."), is
// built as given, with a warning that cloud-init will ignore it.
func TestUserDataOnlyIgnored(t *testing.T) {
	inst, err := spec.Parse([]byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: vm}\nspec:\n  cloudInit:\n    userDataOnly: true\n    userData: \"Hi.\\n\"\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	rep := render.Instance(inst, render.Target{})
	if !rep.OK() {
		t.Fatalf("refused: %v", rep.Errors)
	}
	if ud, _ := rep.Seed.Lookup("user-data"); string(ud) != "Hi.\n" {
		t.Errorf("user-data %q, want it as given", ud)
	}
	if len(rep.Warnings) != 1 || !strings.HasPrefix(rep.Warnings[0].Error(), "spec.cloudInit.userData: cloud-init does not recognise this data") || !strings.Contains(rep.Warnings[0].Error(), "delivered as given") {
		t.Errorf("warnings %v, want one saying cloud-init ignores the user data", rep.Warnings)
	}
}

// parse is an Instance document with body as its spec, defaulted and
// valid, as spec.Load gives every caller of render.Instance.
func parse(t *testing.T, body string) *spec.Instance {
	t.Helper()
	inst, err := spec.Parse([]byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: vm}\nspec:\n"+body), "")
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	return inst
}

// messages are the problems as they print, in order.
func messages(es spec.Errors) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Error()
	}
	return out
}

// hasInOrder reports whether each of want is a prefix of got's messages,
// one for one and in order.
func hasInOrder(got spec.Errors, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i, msg := range messages(got) {
		if !strings.HasPrefix(msg, want[i]) {
			return false
		}
	}
	return true
}

const (
	userCloudConfig = "  cloudInit:\n    userData: |\n      #cloud-config\n"
	// badSchema is a user cloud-config cloud-init's schema refuses.
	badSchema = userCloudConfig + "      runcmd: 5\n"
	// clash writes a file where spec.mounts writes the mount's unit.
	clash = "  mounts: [{device: /dev/vdb, path: /srv}]\n  files: [{path: /etc/systemd/system/srv.mount, content: x}]\n" + userCloudConfig
	// overridden sets spec.commands and replaces them in the user's
	// cloud-config.
	overridden = "  commands: [\"echo spec\"]\n" + userCloudConfig + "      runcmd: [\"echo user\"]\n"
)

// TestInstance runs the pipeline through its public API, spec in and
// output and problems out, for both agents and both datasources.
func TestInstance(t *testing.T) {
	for _, c := range []struct {
		name   string
		spec   string
		target render.Target
		// seed lists files the cloud-init seed must have; nil wants no
		// seed.
		seed     []string
		ignition bool // an Ignition config is wanted
		errors   []string
		warnings []string
	}{{
		name: "cloud-init NoCloud by default",
		spec: "  hostname: web-1\n",
		seed: []string{"user-data", "meta-data"},
	}, {
		name: "cloud-init ConfigDrive from spec.datasource",
		spec: "  hostname: web-1\n  datasource: configdrive\n",
		seed: []string{"openstack/latest/user_data", "openstack/latest/meta_data.json"},
	}, {
		name:   "Target.Datasource over spec.datasource",
		spec:   "  hostname: web-1\n  datasource: configdrive\n",
		target: render.Target{Datasource: seed.NoCloud},
		seed:   []string{"user-data", "meta-data"},
	}, {
		// The seed's rendering refuses the unit path written twice; the
		// user's cloud-config is checked all the same, after it.
		name:   "rendering problems first, then the checks' (no seed)",
		spec:   clash + "      runcmd: 5\n",
		errors: []string{"spec.mounts[0]: /etc/systemd/system/srv.mount is already written by spec.files[0].path", "spec.cloudInit.userData: runcmd (line 2)"},
	}, {
		name:   "VerdictOnly finds what rendering finds",
		spec:   clash + "      runcmd: 5\n",
		target: render.Target{VerdictOnly: true},
		errors: []string{"spec.mounts[0]: /etc/systemd/system/srv.mount is already written by spec.files[0].path", "spec.cloudInit.userData: runcmd (line 2)"},
	}, {
		name:     "Ignition from spec.agent",
		spec:     "  agent: ignition\n  hostname: web-1\n",
		ignition: true,
	}, {
		name:     "Target.Agent over spec.agent",
		spec:     "  hostname: web-1\n",
		target:   render.Target{Agent: spec.AgentIgnition},
		ignition: true,
	}, {
		name:   "VerdictOnly: the verdict without the seed",
		spec:   "  hostname: web-1\n",
		target: render.Target{VerdictOnly: true},
	}, {
		name:   "a schema error is an error for validate",
		spec:   badSchema,
		seed:   []string{"user-data"},
		errors: []string{"spec.cloudInit.userData: runcmd (line 2): got number, want array"},
	}, {
		name:     "and a warning for build (LenientSchema)",
		spec:     badSchema,
		target:   render.Target{LenientSchema: true},
		seed:     []string{"user-data"},
		warnings: []string{"spec.cloudInit.userData: runcmd (line 2): got number, want array"},
	}, {
		name:     "a deprecated key is a warning even for validate",
		spec:     userCloudConfig + "      apt_update: true\n",
		seed:     []string{"user-data"},
		warnings: []string{"spec.cloudInit.userData: apt_update"},
	}, {
		name:   "vendor data is checked as user data is",
		spec:   "  cloudInit:\n    vendorData: |\n      #cloud-config\n      runcmd: 5\n",
		seed:   []string{"vendor-data"},
		errors: []string{"spec.cloudInit.vendorData: runcmd (line 2)"},
	}, {
		name:     "a field the user's cloud-config replaces is a warning",
		spec:     overridden,
		seed:     []string{"user-data"},
		warnings: []string{"spec.cloudInit.userData: runcmd (user-data line 2) replaces the runcmd that spec.commands"},
	}, {
		name:   "Strict makes every warning an error",
		spec:   overridden,
		target: render.Target{Strict: true},
		seed:   []string{"user-data"},
		errors: []string{"spec.cloudInit.userData: runcmd (user-data line 2) replaces the runcmd that spec.commands"},
	}, {
		name:   "what Ignition cannot express is an error",
		spec:   "  agent: ignition\n  packages: [git]\n",
		errors: []string{"spec.packages: Ignition cannot install packages"},
	}, {
		name:     "and dropped with a warning with AllowPartial",
		spec:     "  agent: ignition\n  packages: [git]\n",
		target:   render.Target{AllowPartial: true},
		ignition: true,
		warnings: []string{"spec.packages: Ignition cannot install packages"},
	}, {
		name: "the user's Ignition problems beside the spec's",
		spec: "  agent: ignition\n  packages: [git]\n  ignition:\n    config: '{\"ignition\": {\"version\": \"3.4.0\"}, \"storage\": {\"files\": [{\"path\": \"relative\"}]}}'\n",
		errors: []string{
			"spec.packages: Ignition cannot install packages",
			"spec.ignition.config",
		},
	}, {
		name:   "the transport's budget, on the rendered config",
		spec:   "  agent: ignition\n  commands: [\"" + strings.Repeat("x", 2000) + "\"]\n",
		target: render.Target{Transport: "virtualbox"},
		// The config rendered; the budget refuses it.
		ignition: true,
		errors:   []string{"config too large for its transport: "},
	}, {
		name:   "cloud-init's user data within the transport's budget",
		spec:   "  hostname: web-1\n",
		target: render.Target{Transport: "kubevirt"},
		seed:   []string{"user-data"},
	}, {
		name:   "and past it with the first-boot report, which counts",
		spec:   "  hostname: web-1\n",
		target: render.Target{Transport: "kubevirt", ReportTo: "http://192.0.2.1:8080"},
		seed:   []string{"user-data"},
		errors: []string{"user data too large for its transport: "},
	}} {
		t.Run(c.name, func(t *testing.T) {
			r := render.Instance(parse(t, c.spec), c.target)
			if !hasInOrder(r.Errors, c.errors) {
				t.Errorf("errors:\n%s\nwant, in order, prefixes:\n%s", strings.Join(messages(r.Errors), "\n"), strings.Join(c.errors, "\n"))
			}
			if !hasInOrder(r.Warnings, c.warnings) {
				t.Errorf("warnings:\n%s\nwant, in order, prefixes:\n%s", strings.Join(messages(r.Warnings), "\n"), strings.Join(c.warnings, "\n"))
			}
			if r.OK() != (len(c.errors) == 0) {
				t.Errorf("OK() = %v with errors %v", r.OK(), r.Errors)
			}
			if (r.Seed != nil) != (c.seed != nil) {
				t.Fatalf("seed %v, want one: %v", r.Seed != nil, c.seed != nil)
			}
			for _, f := range c.seed {
				if _, ok := r.Seed.Lookup(f); !ok {
					t.Errorf("seed lacks %s", f)
				}
			}
			if (r.Ignition != nil) != c.ignition {
				t.Errorf("Ignition config %v, want %v", r.Ignition != nil, c.ignition)
			}
		})
	}
}

// TestInstanceOutputsReadByTheAgents: what Instance renders is read by the
// real agents' own code: cloud-init 22.4's NoCloud and ConfigDrive
// readers find the spec's hostname and commands in the seed, and
// ignition-validate accepts the config.
func TestInstanceOutputsReadByTheAgents(t *testing.T) {
	body := "  hostname: web-1\n  commands: [\"echo hi\"]\n"
	for _, c := range []struct {
		ds     seed.Datasource
		reader string
	}{{seed.NoCloud, cloudinittest.NoCloudReader}, {seed.ConfigDrive, cloudinittest.ConfigDriveReader}} {
		t.Run(string(c.ds), func(t *testing.T) {
			cloudinittest.Require(t)
			r := render.Instance(parse(t, body), render.Target{Datasource: c.ds})
			if !r.OK() {
				t.Fatal(r.Errors)
			}
			dir := t.TempDir()
			if err := r.Seed.WriteDir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			got := cloudinittest.ReadSeed(t, c.reader, dir, nil)
			if got.Hostname != "web-1" {
				t.Errorf("hostname %q, want web-1", got.Hostname)
			}
			if rc, _ := got.Config["runcmd"].([]any); len(rc) != 1 {
				t.Errorf("runcmd %v, want the spec's one command", got.Config["runcmd"])
			}
		})
	}
	t.Run("ignition", func(t *testing.T) {
		validate := testtools.Require(t, "ignition-validate")
		r := render.Instance(parse(t, "  agent: ignition\n"+body), render.Target{})
		if !r.OK() {
			t.Fatal(r.Errors)
		}
		f := filepath.Join(t.TempDir(), "config.ign")
		if err := os.WriteFile(f, r.Ignition.Config, 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(validate, f).CombinedOutput(); err != nil {
			t.Errorf("ignition-validate: %v\n%s", err, out)
		}
	})
}
