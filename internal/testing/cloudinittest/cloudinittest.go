// Package cloudinittest runs cloud-init's own Python code from Go tests, so
// that what vminit renders is checked by the program that consumes it rather
// than by vminit's reading of cloud-init's documentation.
//
// It uses /usr/bin/python3 (the distribution's interpreter, where the
// cloud-init package is installed; a pyenv or virtualenv python on PATH would
// not see it). When that interpreter or the cloudinit module is missing, the
// test is skipped locally and fails under CI (see internal/testtools).
package cloudinittest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testing/testtools"
)

// Python is the interpreter the oracle scripts run with.
const Python = "/usr/bin/python3"

var (
	checkOnce sync.Once
	checkErr  string
	version   string
)

// Require stops the test unless /usr/bin/python3 can import cloudinit, and
// returns cloud-init's version string.
func Require(t testing.TB) string {
	t.Helper()
	testtools.RequireFile(t, Python)
	checkOnce.Do(func() {
		out, err := exec.Command(Python, "-c", "from cloudinit import version; print(version.version_string())").CombinedOutput()
		if err != nil {
			checkErr = "cannot import cloudinit with " + Python + ": " + strings.TrimSpace(string(out))
			return
		}
		version = strings.TrimSpace(string(out))
	})
	if checkErr != "" {
		testtools.Missing(t, checkErr)
	}
	return version
}

// Run runs the Python script with in, JSON-encoded, on its standard input
// and decodes its standard output as JSON into out (unless out is nil). The
// script fails the test by exiting non-zero; its standard error is shown.
func Run(t testing.TB, script string, in, out any) {
	t.Helper()
	if err := RunErr(t, script, in, out); err != nil {
		t.Fatal(err)
	}
}

// RunErr is Run that returns the script's failure instead of failing the
// test, for checks that expect cloud-init to reject something.
func RunErr(t testing.TB, script string, in, out any) error {
	t.Helper()
	return RunIn(t, nil, script, in, out)
}

// RunIn is RunErr with the interpreter run by the command wrap (its
// program and arguments, before the interpreter's), e.g. {"ip", "netns",
// "exec", NAME} to run cloud-init's code in a guest's network namespace.
func RunIn(t testing.TB, wrap []string, script string, in, out any) error {
	t.Helper()
	Require(t)
	stdin, err := json.Marshal(in)
	if err != nil {
		t.Fatalf("encoding the oracle's input: %v", err)
	}
	// Bounded: cloud-init's readers have timeouts of their own, but a
	// script must not outlive a test by much if they fail to apply.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append(append([]string(nil), wrap...), Python, "-c", script)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdin = bytes.NewReader(stdin)
	// Keep cloud-init's logging and Python's bytecode out of the tree.
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONHASHSEED=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return &ScriptError{Err: err, Stderr: stderr.String()}
	}
	if out != nil {
		if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
			t.Fatalf("decoding the oracle's output %q: %v\nstderr:\n%s", stdout.String(), err, stderr.String())
		}
	}
	return nil
}

// ScriptError is a Python script's failure.
type ScriptError struct {
	Err    error
	Stderr string
}

func (e *ScriptError) Error() string {
	return "python oracle: " + e.Err.Error() + "\n" + e.Stderr
}

// Schema validates a cloud-config document with `cloud-init schema
// --config-file`, the check cloud-init itself offers to users, and returns
// its complaint, or nil when the document is valid.
func Schema(t testing.TB, cloudConfig []byte) error {
	t.Helper()
	Require(t)
	f := filepath.Join(t.TempDir(), "user-data")
	if err := os.WriteFile(f, cloudConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	// /usr/bin/cloud-init is a Python entry point; run it with the same
	// interpreter so a different python on PATH cannot interfere.
	out, err := exec.Command(Python, "/usr/bin/cloud-init", "schema", "--config-file", f).CombinedOutput()
	if err != nil {
		return &ScriptError{Err: err, Stderr: string(out)}
	}
	if !strings.Contains(string(out), "Valid cloud-config") {
		return &ScriptError{Err: os.ErrInvalid, Stderr: string(out)}
	}
	return nil
}

// NetJSONReaders is Python that defines net_json_readers(): the
// network_data.json readers (convert_net_json) of every cloud-init release
// the tests prove vminit's ConfigDrive network against, by name:
//
//   - "installed": the one on this machine (Debian 12's 22.4.2-1+deb12u4
//     when this was written);
//   - "22.4.2": cloud-init 22.4.2 as released upstream, which Debian 12
//     shipped until 22.4.2-1+deb12u3. deb12u4 differs from it in
//     convert_net_json by one backported line (upstream #5369: a bond
//     link's ethernet_mac_address goes to the bond itself instead of its
//     parameters, which the v1 parser copies to every member); the older
//     reader is rebuilt from the installed source by reverting that line.
//     It is absent when the installed cloud-init does not have the fix,
//     which then is the older reader itself.
//
// The network tests compare each reading with vminit's v1 and v2
// renderings, so a network_data.json that means something else on either
// release fails them.
const NetJSONReaders = `
import inspect, textwrap
from cloudinit.sources.helpers import openstack as _openstack

def net_json_readers():
    readers = {"installed": _openstack.convert_net_json}
    src = textwrap.dedent(inspect.getsource(_openstack.convert_net_json))
    fixed = 'cfg.update({"mac_address": link_mac_addr})'
    if src.count(fixed) == 1:
        scope = dict(vars(_openstack))
        exec(src.replace(fixed, 'params["mac_address"] = link_mac_addr'), scope)
        readers["22.4.2"] = scope["convert_net_json"]
    return readers
`
