package kuberules_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vminit/vminit/internal/testing/kubetest"
	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/mdserver/kuberules"
)

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

// TestClaimsRule: a VMI's address beats a spec's; two equal claims serve
// nobody and both are told, naming the other only within a namespace; a
// VMI that names no Instance keeps a spec from an address; the policy
// refuses spec addresses outside a namespace's networks, and every spec
// address past the bound.
func TestClaimsRule(t *testing.T) {
	c := kuberules.NewClaims(kubetest.Tenants, nil)
	c.SetSpec("a/thief", addrs("10.0.0.5", "10.0.0.6", "10.0.0.7"))
	c.SetSpec("b/web", nil)
	c.SetVMI("b/vm", kubetest.KubeVirtObject("VirtualMachineInstance", "b", "vm", "web", "10.0.0.5"))
	c.SetSpec("b/other", addrs("10.0.0.6"))
	c.SetSpec("a/sibling", addrs("10.0.0.7"))
	c.SetVMI("b/stray", kubetest.KubeVirtObject("VirtualMachineInstance", "b", "stray", "", "10.0.0.8"))
	c.SetSpec("a/squat", addrs("10.0.0.8"))
	c.SetSpec("c/outside", addrs("10.0.0.9"))
	many := make([]netip.Addr, 10_000)
	for i := range many {
		many[i] = netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
	}
	c.SetSpec("a/greedy", many)

	if r := c.Resolve("b/web"); !slices.Equal(r.Addresses, addrs("10.0.0.5")) {
		t.Errorf("b/web, whose VMI reports 10.0.0.5: %+v", r)
	}
	thief := c.Resolve("a/thief")
	if len(thief.Addresses) != 0 || !slices.Equal(thief.Conflicts, addrs("10.0.0.6", "10.0.0.7")) {
		t.Errorf("a/thief: %+v", thief)
	}
	msg := thief.Problems.Error()
	for _, want := range []string{"10.0.0.5 is reported by the VirtualMachineInstance of another Instance", "10.0.0.6 is listed by this Instance and by another Instance", "10.0.0.7 is listed by this Instance and by Instance sibling"} {
		if !strings.Contains(msg, want) {
			t.Errorf("a/thief's problems lack %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "b/") || strings.Contains(msg, "Instance other") || strings.Contains(msg, "web") {
		t.Errorf("a/thief learns of namespace b's objects:\n%s", msg)
	}
	if r := c.Resolve("b/other"); len(r.Addresses) != 0 || !slices.Equal(r.Conflicts, addrs("10.0.0.6")) || strings.Contains(r.Problems.Error(), "thief") {
		t.Errorf("b/other: %+v", r)
	}
	if r := c.Resolve("a/squat"); len(r.Addresses) != 0 || !strings.Contains(r.Problems.Error(), "not this Instance's") {
		t.Errorf("a/squat, on a stray VMI's address: %+v", r)
	}
	if r := c.Resolve("c/outside"); len(r.Addresses) != 0 || !strings.Contains(r.Problems.Error(), "--spec-addresses") {
		t.Errorf("c/outside: %+v", r)
	}
	if r := c.Resolve("a/greedy"); len(r.Addresses) != 0 || !strings.Contains(r.Problems.Error(), "lists 10000 addresses") {
		t.Errorf("a/greedy: %d addresses, %v", len(r.Addresses), r.Problems)
	}
	// The VM names the Instance for a VMI that names none.
	c.SetVM("b/stray", kubetest.KubeVirtObject("VirtualMachine", "b", "stray", "web"))
	if r := c.Resolve("b/web"); !slices.Equal(r.Addresses, addrs("10.0.0.5", "10.0.0.8")) {
		t.Errorf("b/web with its VM's VMI: %+v", r)
	}
}

// TestClaimsVMTemplate: a VM names its Instance on itself or on its
// template (as the controller reads it, and as KubeVirt copies it to the
// VMIs it starts): a VMI started before the template was annotated
// counts for the Instance its VM's template names.
func TestClaimsVMTemplate(t *testing.T) {
	c := kuberules.NewClaims(kubetest.Tenants, nil)
	c.SetSpec("b/web", nil)
	c.SetVMI("b/vm", kubetest.KubeVirtObject("VirtualMachineInstance", "b", "vm", "", "10.0.0.5"))
	vm := kubetest.KubeVirtObject("VirtualMachine", "b", "vm", "")
	unstructured.SetNestedStringMap(vm.Object, map[string]string{v1alpha1.AnnotationInstance: "web"}, "spec", "template", "metadata", "annotations")
	c.SetVM("b/vm", vm)
	if r := c.Resolve("b/web"); !slices.Equal(r.Addresses, addrs("10.0.0.5")) {
		t.Errorf("b/web, named by its VM's template: %+v", r)
	}
}

// TestClaimsPodNetworkOnly: a VMI's addresses count only on the status
// interface named as its pod network (spec.networks[].pod), whatever
// that network is called; a VMI without a pod network counts none, and
// a network with no source is not taken for the pod network.
func TestClaimsPodNetworkOnly(t *testing.T) {
	c := kuberules.NewClaims(kubetest.Tenants, nil)
	named := func(name string, networks []any, status ...any) {
		u := kubetest.VMI("b", name, map[string]string{v1alpha1.AnnotationInstance: name})
		unstructured.SetNestedSlice(u.Object, networks, "spec", "networks")
		unstructured.SetNestedSlice(u.Object, status, "status", "interfaces")
		c.SetVMI("b/"+name, u)
	}
	named("renamed", []any{map[string]any{"name": "storage", "multus": map[string]any{"networkName": "storage"}}, map[string]any{"name": "primary", "pod": map[string]any{}}},
		kubetest.VMIInterface("primary", kubetest.InfoSourceAll, "10.0.0.1"), kubetest.VMIInterface("storage", kubetest.InfoSourceAll, "10.0.0.2"))
	named("multus-only", []any{map[string]any{"name": "storage", "multus": map[string]any{"networkName": "storage"}}},
		kubetest.VMIInterface("storage", kubetest.InfoSourceAll, "10.0.0.3"), kubetest.VMIInterface("", kubetest.InfoSourceGuestAgent, "10.0.0.4"))
	named("no-source", []any{map[string]any{"name": "default"}},
		kubetest.VMIInterface("default", kubetest.InfoSourceAll, "10.0.0.5"))
	// A single-stack pod: virt-handler fills the other family from the
	// guest agent, behind the pod's own first address.
	pod := []any{map[string]any{"name": "default", "pod": map[string]any{}}}
	named("filled-family", pod, kubetest.VMIInterface("default", kubetest.InfoSourceAll, "10.0.0.6", "fd00::6", "10.0.0.16"))
	named("v6-pod", pod, kubetest.VMIInterface("default", kubetest.InfoSourceAll, "fd00::7", "10.0.0.7"))
	// A dual-stack pod whose guest runs no guest agent: every address is
	// the pod's, and both families count (the guest's IPv6 requests, for
	// fd00:ec2::254, come from the second).
	named("dual-stack", pod, kubetest.VMIInterface("default", kubetest.InfoSourceDomain, "10.0.0.8", "fd00::8"))
	for key, want := range map[string][]netip.Addr{"b/renamed": addrs("10.0.0.1"), "b/multus-only": nil, "b/no-source": nil,
		"b/filled-family": addrs("10.0.0.6", "10.0.0.16"), "b/v6-pod": addrs("fd00::7"), "b/dual-stack": addrs("10.0.0.8", "fd00::8")} {
		if r := c.Resolve(key); !slices.Equal(r.Addresses, want) || r.Problems != nil {
			t.Errorf("%s: %+v, want %v", key, r, want)
		}
	}
}

// TestClaimsOrderIndependent: the same objects, applied in any order
// (and with detours: objects that change and come back), resolve the
// same: replicas that saw a different list or watch order agree.
func TestClaimsOrderIndependent(t *testing.T) {
	type op struct {
		kind, key string
		apply     func(*kuberules.Claims) []string
	}
	var ops []op
	ip := func(i int) string { return fmt.Sprintf("10.0.0.%d", i%7) }
	for i := range 12 {
		ns := []string{"a", "b"}[i%2]
		key := fmt.Sprintf("%s/i%d", ns, i)
		list := addrs(ip(i), ip(i*3+1))
		ops = append(ops, op{"spec", key, func(c *kuberules.Claims) []string { return c.SetSpec(key, list) }})
		vmiName := fmt.Sprintf("vm%d", i)
		inst := ""
		if i%3 != 0 {
			inst = fmt.Sprintf("i%d", i)
		}
		vmi := kubetest.KubeVirtObject("VirtualMachineInstance", ns, vmiName, inst, ip(i*5+2))
		ops = append(ops, op{"vmi", ns + "/" + vmiName, func(c *kuberules.Claims) []string { return c.SetVMI(ns+"/"+vmiName, vmi) }})
		if i%3 == 0 {
			vm := kubetest.KubeVirtObject("VirtualMachine", ns, vmiName, fmt.Sprintf("i%d", (i+2)%12))
			ops = append(ops, op{"vm", ns + "/" + vmiName, func(c *kuberules.Claims) []string { return c.SetVM(ns+"/"+vmiName, vm) }})
		}
	}
	resolveAll := func(c *kuberules.Claims) string {
		var b strings.Builder
		for i := range 12 {
			key := fmt.Sprintf("%s/i%d", []string{"a", "b"}[i%2], i)
			r := c.Resolve(key)
			fmt.Fprintf(&b, "%s %v %v %v\n", key, r.Addresses, r.Conflicts, r.Problems)
		}
		return b.String()
	}
	want := ""
	rng := rand.New(rand.NewPCG(25, 1))
	for round := range 200 {
		c := kuberules.NewClaims(kubetest.Tenants, nil)
		order := slices.Clone(ops)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, o := range order {
			// A detour: the object gone for a moment, then back.
			if rng.IntN(4) == 0 {
				switch o.kind {
				case "spec":
					c.SetSpec(o.key, nil)
				case "vmi":
					c.SetVMI(o.key, nil)
				case "vm":
					c.SetVM(o.key, nil)
				}
			}
			o.apply(c)
		}
		got := resolveAll(c)
		if round == 0 {
			want = got
			if !strings.Contains(want, "served to neither") {
				t.Fatalf("the fixture has no conflict to order:\n%s", want)
			}
			continue
		}
		if got != want {
			t.Fatalf("round %d resolves differently:\n%s\nthan the first order:\n%s", round, got, want)
		}
	}
}

func TestParseSpecAddresses(t *testing.T) {
	got, err := kuberules.ParseSpecAddresses([]string{"tenant-a=10.1.0.0/16, 10.2.0.0/16", "tenant-b=fd00::/64"})
	if err != nil || len(got["tenant-a"]) != 2 || got["tenant-b"][0].String() != "fd00::/64" {
		t.Errorf("%v %v", got, err)
	}
	for _, bad := range []string{"tenant-a", "=10.0.0.0/8", "a=10.0.0.1", "a="} {
		if _, err := kuberules.ParseSpecAddresses([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
