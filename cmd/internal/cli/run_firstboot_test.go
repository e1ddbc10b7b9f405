package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	vmrun "github.com/vminit/vminit/cmd/internal/run"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// failedOnTheServer is a --serve run whose console saw cloud-init finish,
// and whose metadata server saw scripts-user fail (the run package's
// Result for it).
func failedOnTheServer() *vmrun.Result {
	f := firstboot.Failure{Stage: "modules-final", Module: "config-scripts-user", Message: "vminit-boom\nexit 3"}
	return &vmrun.Result{Agent: "cloud-init", Elapsed: 40 * time.Second,
		Errors: []string{"metadata server: modules-final/config-scripts-user: vminit-boom\nexit 3"},
		FirstBoot: &firstboot.Status{Name: "dev", Agent: "cloud-init", State: firstboot.Failed,
			Stage: "modules-final", Module: "config-scripts-user", Errors: []firstboot.Failure{f}}}
}

// TestRunSaysTheServersFirstBoot: with --serve, run ends with the first
// boot as the metadata server saw it (state, where it failed, the first
// error's first line), the server's multi-line errors indented; --json
// carries it as firstBoot.
func TestRunSaysTheServersFirstBoot(t *testing.T) {
	var w bytes.Buffer
	printRunResult(&w, "dev", failedOnTheServer())
	got := w.String()
	for _, want := range []string{
		"dev: cloud-init first boot finished in 40s with 1 error(s):\n  metadata server: modules-final/config-scripts-user: vminit-boom\n    exit 3\n",
		"dev: first boot as the metadata server saw it: failed at modules-final/config-scripts-user: vminit-boom\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("run says:\n%s\nwant it to say:\n%s", got, want)
		}
	}
	w.Reset()
	printRunResult(&w, "dev", &vmrun.Result{Agent: "cloud-init", OK: true, Elapsed: time.Second,
		FirstBoot: &firstboot.Status{State: firstboot.Done, Stage: "modules-final"}})
	if got := w.String(); !strings.HasSuffix(got, "dev: first boot as the metadata server saw it: done\n") {
		t.Errorf("a done boot said as:\n%s", got)
	}

	cmd := &cobra.Command{}
	var out bytes.Buffer
	cmd.SetOut(&out)
	if err := reportRunJSON(cmd, "dev", failedOnTheServer(), nil); err == nil {
		t.Error("--json: a failed boot is no error")
	}
	var rep struct {
		OK        bool `json:"ok"`
		FirstBoot struct {
			State  string              `json:"state"`
			Stage  string              `json:"stage"`
			Module string              `json:"module"`
			Errors []firstboot.Failure `json:"errors"`
		} `json:"firstBoot"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if fb := rep.FirstBoot; rep.OK || fb.State != "failed" || fb.Module != "config-scripts-user" || len(fb.Errors) != 1 || fb.Errors[0].Message != "vminit-boom\nexit 3" {
		t.Errorf("--json: %s", out.String())
	}
}
