package mdserver_test

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/vminit/vminit/cmd/internal/cli"
	vmrun "github.com/vminit/vminit/cmd/internal/run"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/admin"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

// TestToyDialectInEveryProgram: the toy dialect, declared in
// dialect_test.go alone, is in everything that lists dialects, with no
// other edit: the admin API previews it, vminit run offers it to
// cloud-init (its declared reader), and the help of serve, run and
// instances preview show it. They read the registry (mdserver.Dialects),
// not lists of their own.
func TestToyDialectInEveryProgram(t *testing.T) {
	inst, _, err := spec.Decode([]byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata:\n  name: vm-a\nspec:\n  fqdn: vm-a.example.com\n"))
	if err != nil {
		t.Fatal(err)
	}
	inst.Default()
	rec, err := registry.NewRecord(inst, "1")
	if err != nil {
		t.Fatal(err)
	}
	store, err := registry.NewStaticStore([]*registry.Record{rec})
	if err != nil {
		t.Fatal(err)
	}
	h := mdserver.NewHandler(store, mdserver.Options{Logger: slog.New(slog.DiscardHandler)})
	if !slices.Contains(admin.PreviewDialects, "toy") {
		t.Errorf("admin.PreviewDialects %v lack toy", admin.PreviewDialects)
	}
	p, err := admin.NewLocal(store, admin.Options{Metadata: h}).Preview(context.Background(), "vm-a", "toy")
	if err != nil || len(p.Files) != 1 || p.Files[0].Path != "/toy/hello" || p.Files[0].Content != "hello vm-a (vm-a.example.com)\n" || len(p.Warnings) != 0 {
		t.Errorf("admin preview of toy: %+v %v", p, err)
	}

	if !slices.Contains(vmrun.Dialects()[spec.AgentCloudInit], "toy") || slices.Contains(vmrun.Dialects()[spec.AgentIgnition], "toy") {
		t.Errorf("vminit run's dialects %v: want toy for cloud-init alone, as it declares", vmrun.Dialects())
	}

	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"over HTTP (EC2 IMDS, OpenStack, NoCloud-net, Ignition, Toy)\n"}},
		{[]string{"serve", "--help"}, []string{"\n  Ignition     /ignition/config, /ignition/pointer[?transport=ec2]\n  Toy          /toy/hello (X-Toy-Key: the instance's name)\n"}},
		{[]string{"run", "--help"}, []string{"cloud-init ec2, openstack, nocloud or toy (default"}},
		{[]string{"instances", "preview", "--help"}, []string{"nocloud, configdrive, ignition, ec2, openstack or toy"}},
	} {
		var out, errs bytes.Buffer
		if code := cli.Main(c.args, &out, &errs); code != 0 {
			t.Fatalf("vminit %s: exit %d: %s", strings.Join(c.args, " "), code, errs.String())
		}
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("vminit %s lacks %q:\n%s", strings.Join(c.args, " "), w, out.String())
			}
		}
	}
}
