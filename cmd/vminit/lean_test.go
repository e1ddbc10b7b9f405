package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// heavy are packages vminit must not link: each registers or builds at
// init what only the controller (cmd/vminit-controller) or the etcd store
// (cmd/vminit-server) needs, and vminit would pay for it on every run
// (docs/benchmarks.md, "Whole process").
var heavy = []string{
	"k8s.io/client-go/kubernetes",        // the typed clientset, 55 API groups
	"k8s.io/client-go/kubernetes/scheme", // their types registered at init
	"k8s.io/client-go/discovery",
	"k8s.io/client-go/informers",
	"k8s.io/client-go/tools/leaderelection",
	"github.com/vminit/vminit/cmd/internal/controller",
	"github.com/vminit/vminit/mdserver/etcdstore",
	"go.etcd.io/etcd/client/v3",
	"go.etcd.io/etcd/api/v3/etcdserverpb", // protobuf registrations at init
	"google.golang.org/grpc",
}

// dataPath are packages only the node agent (cmd/vminit-node) and
// vminit-cni link: nftables' netlink and the CNI types (mdserver/intercept,
// cmd/internal/cniplugin).
var dataPath = []string{
	"github.com/google/nftables",
	"github.com/containernetworking/cni/pkg/skel",
	"github.com/containernetworking/plugins/pkg/ns",
	"github.com/vminit/vminit/mdserver/intercept",
}

// TestLeanGraph: each program links its own set of vminit's packages
// (linkSets, programs); vminit's import graph holds none of heavy and
// none of dataPath; vminit-node's (serve and the interception) holds
// dataPath and none of heavy; vminit-controller's, vminit-server's and
// vminit-cni's hold theirs (so the lists are read right).
func TestLeanGraph(t *testing.T) {
	t.Run("each program its own set", linkSets)
	vminit := deps(t, "github.com/vminit/vminit/cmd/vminit")
	for _, p := range append(slices.Clone(heavy), dataPath...) {
		if vminit[p] {
			t.Errorf("cmd/vminit links %s", p)
		}
	}
	node := deps(t, "github.com/vminit/vminit/cmd/vminit-node")
	for _, p := range heavy {
		if node[p] {
			t.Errorf("cmd/vminit-node links %s", p)
		}
	}
	for _, p := range dataPath {
		if !node[p] {
			t.Errorf("cmd/vminit-node does not link %s: is `go list -deps` read right?", p)
		}
	}
	if ctl := deps(t, "github.com/vminit/vminit/cmd/vminit-controller"); !ctl["k8s.io/client-go/kubernetes"] {
		t.Errorf("cmd/vminit-controller does not link the typed clientset: is `go list -deps` read right?")
	}
	if srv := deps(t, "github.com/vminit/vminit/cmd/vminit-server"); !srv["go.etcd.io/etcd/client/v3"] {
		t.Errorf("cmd/vminit-server does not link etcd's client: is `go list -deps` read right?")
	}
	if cni := deps(t, "github.com/vminit/vminit/cmd/vminit-cni"); !cni["github.com/google/nftables"] {
		t.Errorf("cmd/vminit-cni does not link nftables: is `go list -deps` read right?")
	}
}

// module is the prefix of vminit's own packages.
const module = "github.com/vminit/vminit/"

// programs are vminit's programs, each with the packages that do its job
// (roots) and the command package that only wires them (command): a
// program links vminit's packages that its roots need and its command,
// nothing more. So a command that reaches for another program's command
// tree (vminit-controller and vminit-server once linked vminit's CLI for
// a logger and the serve command: 53 of vminit's packages where they
// needed 31 and 43) fails TestLeanGraph, and so does a root that
// starts to import what its job does not need.
var programs = []struct {
	main, command string
	roots         []string
}{
	{"cmd/vminit", "cmd/internal/cli", []string{"cmd/internal/cli"}},
	{"cmd/vminit-server", "cmd/internal/servercmd", []string{"cmd/internal/cmdkit", "cmd/internal/servekit", "mdserver/etcdstore"}},
	{"cmd/vminit-controller", "cmd/internal/controllercmd", []string{"cmd/internal/cmdkit", "cmd/internal/controller"}},
	{"cmd/vminit-node", "cmd/internal/nodecmd", []string{"cmd/internal/cmdkit", "cmd/internal/servekit", "mdserver/intercept", "cmd/internal/cniplugin"}},
	{"cmd/vminit-cni", "cmd/internal/cniplugin", []string{"cmd/internal/cniplugin"}},
}

// linkSets (TestLeanGraph): each program links of vminit's packages only
// its main package, its command and what its roots import; no program but
// vminit links vminit's CLI; the kit (cmdkit) and serve's command
// (servekit) import no program's command.
func linkSets(t *testing.T) {
	kits := []string{"cmd/internal/cmdkit", "cmd/internal/servekit"}
	pkgs := slices.Clone(kits)
	for _, p := range programs {
		pkgs = append(append(pkgs, p.main), p.roots...)
	}
	all := depsOf(t, pkgs...)
	for _, p := range programs {
		linked := all[p.main]
		want := map[string]bool{module + p.main: true, module + p.command: true}
		for _, r := range p.roots {
			if !linked[module+r] {
				t.Errorf("%s does not link %s: is the list right?", p.main, r)
			}
			maps.Copy(want, all[r])
		}
		for _, l := range slices.Sorted(maps.Keys(linked)) {
			if strings.HasPrefix(l, module) && !want[l] {
				t.Errorf("%s links %s, which neither its command nor its roots (%s) need", p.main, strings.TrimPrefix(l, module), strings.Join(p.roots, ", "))
			}
		}
		if p.main != "cmd/vminit" && linked[module+"cmd/internal/cli"] {
			t.Errorf("%s links vminit's CLI (cmd/internal/cli): take what programs share from cmd/internal/cmdkit or servekit", p.main)
		}
	}
	for _, kit := range kits {
		for _, p := range programs {
			if slices.Contains(p.roots, p.command) {
				continue // a library its own program runs (vminit-cni's plugin, which vminit-node installs)
			}
			if all[kit][module+p.command] {
				t.Errorf("%s links %s, a program's command", kit, p.command)
			}
		}
	}
}

// depsOf is, for each of vminit's packages pkgs (relative to the module),
// the set of packages it is and imports, directly or not: one `go list`.
func depsOf(t *testing.T, pkgs ...string) map[string]map[string]bool {
	t.Helper()
	args := []string{"list", "-json=ImportPath,Deps"}
	for _, p := range pkgs {
		args = append(args, module+p)
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	m := map[string]map[string]bool{}
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p struct {
			ImportPath string
			Deps       []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		set := map[string]bool{p.ImportPath: true}
		for _, d := range p.Deps {
			set[d] = true
		}
		m[strings.TrimPrefix(p.ImportPath, module)] = set
	}
	return m
}

// stores are the metadata server's stores: the controller imports none
// (the rules it shares with them live in mdserver/kuberules), so that what
// it reports does not depend on a store's insides and it links no etcd.
var stores = []string{
	"github.com/vminit/vminit/mdserver/dirstore",
	"github.com/vminit/vminit/mdserver/etcdstore",
	"github.com/vminit/vminit/mdserver/kubestore",
}

// TestControllerImportsNoStore: cmd/internal/controller's import graph
// holds no store.
func TestControllerImportsNoStore(t *testing.T) {
	ctl := deps(t, "github.com/vminit/vminit/cmd/internal/controller")
	for _, p := range stores {
		if ctl[p] {
			t.Errorf("cmd/internal/controller links %s: the rules it shares with the stores belong in mdserver/kuberules", p)
		}
	}
	if !ctl["github.com/vminit/vminit/mdserver/kuberules"] {
		t.Errorf("cmd/internal/controller does not link mdserver/kuberules: is `go list -deps` read right?")
	}
}

// deps is the set of packages pkg imports, directly or not.
func deps(t *testing.T, pkg string) map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	m := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		m[p] = true
	}
	return m
}

// lazy are vminit's packages that must do no real work at init (their
// tables are built on first use): every vminit run links them, and most
// runs never use what they build.
var lazy = []string{
	"github.com/vminit/vminit/cloudinit",
	"github.com/vminit/vminit/cmd/internal/cli",
	"github.com/vminit/vminit/cmd/internal/cmdkit",
	"github.com/vminit/vminit/cmd/internal/run",
	"github.com/vminit/vminit/cmd/internal/servekit",
	"github.com/vminit/vminit/internal/lib/yaml11",
	"github.com/vminit/vminit/mdserver/dirstore",
	"github.com/vminit/vminit/mdserver/kuberules",
	"github.com/vminit/vminit/network",
	"github.com/vminit/vminit/platform",
	"github.com/vminit/vminit/platform/convert",
	"github.com/vminit/vminit/platform/ovirt",
	"github.com/vminit/vminit/spec",
}

// TestInitIsLazy reads the Go runtime's trace of package initialisation
// (GODEBUG=inittrace=1) of this test binary, which links what vminit
// links: each package in lazy allocates at most 1 KiB at init (a
// sync.OnceValue), or has no init at all. Allocations, unlike times, are
// the same on every run.
func TestInitIsLazy(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// init PKG @T ms, T ms clock, BYTES bytes, N allocs
	allocated := map[string]int{}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 11 && f[0] == "init" && f[8] == "bytes," {
			allocated[f[1]], _ = strconv.Atoi(f[7])
		}
	}
	if len(allocated) == 0 {
		t.Fatalf("no init trace in\n%s", out)
	}
	for _, p := range lazy {
		if n := allocated[p]; n > 1024 {
			t.Errorf("%s allocates %d bytes at init", p, n)
		}
	}
}
