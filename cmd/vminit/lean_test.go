package main

import (
	"os/exec"
	"strings"
	"testing"
)

// heavy are packages vminit must not link: each registers or builds at
// init what only the controller (cmd/vminit-controller) needs, and vminit
// would pay for it on every run (docs/benchmarks.md, "Whole process").
var heavy = []string{
	"k8s.io/client-go/kubernetes",        // the typed clientset, 55 API groups
	"k8s.io/client-go/kubernetes/scheme", // their types registered at init
	"k8s.io/client-go/discovery",
	"k8s.io/client-go/informers",
	"k8s.io/client-go/tools/leaderelection",
	"github.com/vminit/vminit/internal/app/controller",
}

// TestLeanGraph: vminit's import graph holds none of heavy, and
// vminit-controller's does (so the list below is read right).
func TestLeanGraph(t *testing.T) {
	vminit := deps(t, "github.com/vminit/vminit/cmd/vminit")
	for _, p := range heavy {
		if vminit[p] {
			t.Errorf("cmd/vminit links %s", p)
		}
	}
	if ctl := deps(t, "github.com/vminit/vminit/cmd/vminit-controller"); !ctl["k8s.io/client-go/kubernetes"] {
		t.Errorf("cmd/vminit-controller does not link the typed clientset: is `go list -deps` read right?")
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
