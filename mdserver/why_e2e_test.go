package mdserver

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/internal/testing/ignitiontest"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// cloudInitFinal runs, with Debian's cloud-init 22.4, what its final
// stage does with a runcmd: the scripts-user module (cc_scripts_user,
// subp.runparts on the instance's scripts/runcmd), under the module
// runner's logexc, with cloud-init's console logging (WARNING, its
// format) and the commands' output on one stream, as the guest's
// cloud-init-output.log gets them; status.json and result.json are
// written with status_wrapper's expressions. Its input is
// {"root": dir}; its answer, {}.
const cloudInitFinal = `
import json, logging, os, sys
from cloudinit import util
from cloudinit.config import cc_scripts_user as mod
root = json.load(sys.stdin)["root"]
out = open(os.path.join(root, "cloud-init-output.log"), "w")
answer = os.dup(1)
os.dup2(out.fileno(), 1); os.dup2(out.fileno(), 2)
sys.stdout = os.fdopen(1, "w", buffering=1); sys.stderr = os.fdopen(2, "w", buffering=1)
h = logging.StreamHandler(sys.stderr)
h.setFormatter(logging.Formatter("%(asctime)s - %(filename)s[%(levelname)s]: %(message)s"))
h.setLevel(logging.WARNING)
logging.getLogger().addHandler(h); logging.getLogger().setLevel(logging.DEBUG)
LOG = logging.getLogger("cloudinit.config.modules")
class Cloud:
    def get_ipath_cur(self, name=None): return os.path.join(root, "instance")
failures = []
try:
    mod.handle("scripts-user", {}, Cloud(), logging.getLogger("cloudinit.config.cc_scripts_user"), [])
except Exception as e:
    util.logexc(LOG, "Running module %s (%s) failed", "scripts-user", mod)
    failures.append(("scripts-user", e))
errors = [str(e) for e in failures]
status = {"v1": {"datasource": "DataSourceNoCloud", "stage": None, "init": {"errors": [], "start": 1.0, "finished": 2.0},
  "modules-final": {"errors": errors, "start": 3.0, "finished": 4.0}}}
json.dump(status, open(os.path.join(root, "status.json"), "w"))
json.dump({"v1": {"datasource": "DataSourceNoCloud", "errors": errors}}, open(os.path.join(root, "result.json"), "w"))
os.write(answer, b"{}")
`

// TestFirstErrorSaysWhyCloudInit: a runcmd whose command fails (a unit
// that does not exist, enabled) fails cloud-init's real scripts-user
// module; the guest's report of it (report.py, with cloud-init's
// status.json, result.json and output log) makes the first error the
// command's own words, where the exception (RuntimeError('Runparts: 1
// failures (runcmd) …')) and cloud-init's warnings said only what ran.
// The webhook event of the module's failure, first, says
// what cloud-init said, and the report's line replaces it.
func TestFirstErrorSaysWhyCloudInit(t *testing.T) {
	cloudinittest.Require(t)
	root := t.TempDir()
	scripts := filepath.Join(root, "instance", "scripts")
	os.MkdirAll(scripts, 0o755)
	// As cloud-init's runcmd module writes it; the command's words are
	// whatever this host's systemctl (or sh, without one) says.
	runcmd := "#!/bin/sh\necho enabling nginx\nsystemctl enable vminit-missing-nginx.service\n"
	if err := os.WriteFile(filepath.Join(scripts, "runcmd"), []byte(runcmd), 0o755); err != nil {
		t.Fatal(err)
	}
	said, _ := exec.Command("/bin/sh", filepath.Join(scripts, "runcmd")).CombinedOutput()
	cause := strings.TrimSpace(strings.TrimPrefix(string(said), "enabling nginx\n"))
	if cause == "" || strings.Contains(cause, "\n") {
		t.Fatalf("the failing command said %q", said)
	}
	var nothing struct{}
	cloudinittest.Run(t, cloudInitFinal, map[string]any{"root": root}, &nothing)
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	status, result, log := read("status.json"), read("result.json"), read("cloud-init-output.log")
	if !strings.Contains(status, "Runparts: 1 failures (runcmd)") || !strings.Contains(log, cause) {
		t.Fatalf("cloud-init did not fail as a guest's does:\n%s\n%s", status, log)
	}

	store := newIndexStore()
	store.put(t, instanceDoc("vm-a", []string{"127.0.0.1"}, ""))
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger()})
	srv, _ := serve(t, h)
	// The event cloud-init's webhook posts as the module fails.
	ev := `{"name": "modules-final/config-scripts-user", "description": "running module scripts-user (<module 'cloudinit.config.cc_scripts_user' from '/usr/lib/python3/dist-packages/cloudinit/config/cc_scripts_user.py'>) failed", "event_type": "finish", "origin": "cloudinit", "timestamp": 1.0, "result": "FAIL"}`
	if r := do(t, clientFrom("127.0.0.1"), "POST", srv.URL+"/vminit/v1/events", nil, ev); r.status != 204 {
		t.Fatalf("event: %d %s", r.status, r.body)
	}
	runReportScript(t, srv.URL, map[string]string{
		"run/cloud-init/status.json": status, "run/cloud-init/result.json": result, "var/log/cloud-init-output.log": log,
	})
	want := "modules-final/config-scripts-user: " + cause
	st, _ := h.Boot("vm-a")
	if st.State != firstboot.Failed || st.FirstError() != want {
		t.Errorf("first error %q, want %q\nlog:\n%s", st.FirstError(), want, log)
	}
	if row := h.opts.Boots.Brief("vm-a", st.UID, firstboot.AgentCloudInit); row.FirstError() != want {
		t.Errorf("the fleet's row: %q, want %q", row.FirstError(), want)
	}
}

// TestFirstErrorSaysWhyIgnition: a unit whose program cannot start (a
// shared library it was linked with is gone: the loader's own words,
// from a program built and run here) fails. The guest fetched its
// Ignition config from the handler, real Ignition applied it, and the
// completion unit's script it wrote reports the unit with its journal as
// journalctl prints it (systemd 252's lines around the program's); the
// first error is the program's line, not systemd's "Starting
// app.service…" before it.
func TestFirstErrorSaysWhyIgnition(t *testing.T) {
	gcc := testtools.Require(t, "gcc")
	dir := t.TempDir()
	src := func(name, code string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(code), 0o644)
		return p
	}
	lib := filepath.Join(dir, "libssl.so.1.1")
	if out, err := exec.Command(gcc, "-shared", "-fPIC", "-Wl,-soname,libssl.so.1.1", "-o", lib, src("ssl.c", "int ssl_init(void) { return 0; }\n")).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	app := filepath.Join(dir, "app")
	if out, err := exec.Command(gcc, "-o", app, src("app.c", "int ssl_init(void);\nint main(void) { return ssl_init(); }\n"), lib, "-Wl,-rpath,"+dir).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	os.Remove(lib)
	said, err := exec.Command(app).CombinedOutput()
	cause := strings.TrimSpace(string(said))
	if err == nil || !strings.Contains(cause, "error while loading shared libraries: libssl.so.1.1") {
		t.Fatalf("the program: %v %q", err, said)
	}
	journal := "Nov 29 03:40:01 fcos systemd[1]: Starting app.service - App...\n" +
		"Nov 29 03:40:01 fcos app[812]: " + cause + "\n" +
		"Nov 29 03:40:01 fcos systemd[1]: app.service: Main process exited, code=exited, status=127/n/a\n" +
		"Nov 29 03:40:01 fcos systemd[1]: app.service: Failed with result 'exit-code'.\n" +
		"Nov 29 03:40:01 fcos systemd[1]: Failed to start app.service - App."

	store := newIndexStore()
	store.put(t, instanceDoc("fcos-1", []string{"127.0.0.1"}, "  agent: ignition\n"))
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger()})
	srv, _ := serve(t, h)
	cfg := get(t, clientFrom("127.0.0.1"), srv.URL+"/ignition/config")
	if cfg.status != 200 {
		t.Fatalf("the config: %d %s", cfg.status, cfg.body)
	}
	root := ignitiontest.Apply(t, []byte(cfg.body))
	ignitiontest.RunReport(t, root, ignitiontest.Boot{State: "degraded", Failed: []ignitiontest.FailedUnit{{Unit: "app.service", Journal: journal}}})
	want := "app.service: " + cause
	st, _ := h.Boot("fcos-1")
	if st.State != firstboot.Failed || st.FirstError() != want {
		t.Errorf("first error %q, want %q", st.FirstError(), want)
	}
	if row := h.opts.Boots.Brief("fcos-1", st.UID, firstboot.AgentIgnition); row.FirstError() != want {
		t.Errorf("the fleet's row %q, want %q", row.FirstError(), want)
	}
}
