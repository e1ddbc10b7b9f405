package kuberules

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

// DefaultMaxSpecAddresses bounds the addresses one Instance's spec may
// claim (AddressPolicy.MaxSpecAddresses).
const DefaultMaxSpecAddresses = 16

// maxReported bounds the addresses one VMI adds: its status is KubeVirt's,
// but a store must not grow with whatever an object says.
const maxReported = 64

// Key names an object of a namespace (an Instance, a VMI, a VM):
// NAMESPACE/NAME, the key of Claims and of the store's records, so that
// two namespaces' `web` are two instances.
func Key(ns, name string) string { return ns + "/" + name }

// AddressPolicy is what the operator lets Instances' specs claim. In a
// cluster the namespaces are tenants, and an address in
// spec.metadataServer.addresses hands the instance's data (its runcmd
// runs as root) to whatever VM has that address: a tenant may list only
// addresses inside the networks the operator gave its namespace.
type AddressPolicy struct {
	// SpecAddresses are, by namespace, the networks its Instances' specs
	// may list addresses in. A namespace not listed may list none: its
	// Instances are served to the VMIs that name them, and by name
	// through a trusted proxy.
	SpecAddresses map[string][]netip.Prefix
	// MaxSpecAddresses bounds the addresses one spec may list; default
	// DefaultMaxSpecAddresses. A spec listing more claims none.
	MaxSpecAddresses int
}

// ParseSpecAddresses reads NAMESPACE=CIDR[,CIDR…] values (the
// --spec-addresses flag of `serve --kubernetes` and `controller`).
func ParseSpecAddresses(values []string) (map[string][]netip.Prefix, error) {
	out := map[string][]netip.Prefix{}
	for _, v := range values {
		ns, list, ok := strings.Cut(v, "=")
		if !ok || ns == "" || list == "" {
			return nil, fmt.Errorf("--spec-addresses %q: want NAMESPACE=CIDR[,CIDR…]", v)
		}
		for _, c := range strings.Split(list, ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(c))
			if err != nil {
				return nil, fmt.Errorf("--spec-addresses %q: %w", v, err)
			}
			out[ns] = append(out[ns], p.Masked())
		}
	}
	return out, nil
}

// Check returns why the spec of an Instance in namespace ns may not claim
// addrs (its metadataServer.addresses), one error per address, or nil.
func (p AddressPolicy) Check(ns string, addrs []netip.Addr) error {
	if _, errs := p.filter(ns, addrs); errs != nil {
		return errs
	}
	return nil
}

// filter returns the addresses of addrs the spec of an Instance in
// namespace ns may claim, and why it may not claim the others.
func (p AddressPolicy) filter(ns string, addrs []netip.Addr) ([]netip.Addr, spec.Errors) {
	const field = "spec.metadataServer.addresses"
	if max := cmp.Or(p.MaxSpecAddresses, DefaultMaxSpecAddresses); len(addrs) > max {
		return nil, spec.Errors{{Field: field, Message: fmt.Sprintf(
			"lists %d addresses; an Instance may claim %d at most, so it claims none", len(addrs), max)}}
	}
	var kept []netip.Addr
	var errs spec.Errors
	for i, a := range addrs {
		if slices.ContainsFunc(p.SpecAddresses[ns], func(n netip.Prefix) bool { return n.Contains(a) }) {
			kept = append(kept, a)
			continue
		}
		errs = append(errs, &spec.FieldError{Field: fmt.Sprintf("%s[%d]", field, i), Message: fmt.Sprintf(
			"%s is not in a network the operator lets namespace %s claim (--spec-addresses), so it is not claimed: the VMIs that name this Instance identify it", a, ns)})
	}
	return kept, errs
}

// Claims are who claims which address in a cluster, and the one rule that
// decides who is served there (Resolve). `serve --kubernetes` serves by
// it and the controller reports it in the Served condition, so the two
// cannot disagree.
//
// An instance claims the addresses its spec lists, when the AddressPolicy
// allows them, and those its VirtualMachineInstances report on their pod
// network (vmiOf: a guest chooses none of those). An address is served
// to:
//
//   - the one Instance that VMIs reporting it name, when every VMI
//     reporting it names that Instance: a VMI's address is what
//     KubeVirt saw the guest use, and beats any address a spec lists;
//   - else, when no VMI reports it, the one Instance whose spec lists it;
//   - else nobody: two Instances claiming it with equal rank, or a VMI
//     naming no Instance, is a conflict, and both are told.
//
// The answer is a function of the set of claims alone, never of the order
// they arrived in, so every replica reaches the same one. Keys are
// namespace/name. Claims is not safe for concurrent use.
type Claims struct {
	policy AddressPolicy
	// specs are each instance's allowed spec addresses; refused why the
	// others are not claimed.
	specs   map[string][]netip.Addr
	refused map[string]spec.Errors
	vmis    map[string]vmi    // VMI namespace/name
	vms     map[string]string // VM namespace/name → the Instance key it names
	// counting are, by instance key, the VMIs whose addresses count for
	// it.
	counting map[string]map[string]bool
	// unservable says which addresses a VMI reports that the server will
	// never serve (loopback, its trusted proxies): they count for nobody.
	unservable func(netip.Addr) bool
	// byAddr are the claims on each address.
	byAddr map[netip.Addr]*claim
}

// claim is who claims one address.
type claim struct {
	spec map[string]bool   // instance keys whose spec lists it
	vmis map[string]string // VMI keys reporting it → the instance key each counts for ("": none)
}

type vmi struct {
	instance string // the Instance key its annotation names, "" when none
	addrs    []netip.Addr
	// vm says a VirtualMachine (of the same name) controls it: the one
	// whose annotation counts when the VMI's own names none.
	vm bool
}

// NewClaims returns empty Claims under policy. unservable, when not nil,
// says which addresses the server never serves (the Store's
// registry.Checks.Policy): a VMI reporting one still keeps a spec from
// claiming it, but counts for nobody.
func NewClaims(policy AddressPolicy, unservable func(netip.Addr) bool) *Claims {
	return &Claims{policy: policy, specs: map[string][]netip.Addr{}, refused: map[string]spec.Errors{},
		vmis: map[string]vmi{}, vms: map[string]string{}, counting: map[string]map[string]bool{},
		byAddr: map[netip.Addr]*claim{}, unservable: unservable}
}

// count claims VMI vk's addresses for instance inst ("" for none).
func (c *Claims) count(vk string, v vmi, inst string) {
	if inst != "" {
		if c.counting[inst] == nil {
			c.counting[inst] = map[string]bool{}
		}
		c.counting[inst][vk] = true
	}
	for _, a := range v.addrs {
		if c.unservable != nil && c.unservable(a) {
			c.at(a).vmis[vk] = ""
		} else {
			c.at(a).vmis[vk] = inst
		}
	}
}

// uncount undoes count(vk, v, inst), adding to out the instances whose
// resolution may change.
func (c *Claims) uncount(out Affected, vk string, v vmi, inst string) {
	out[inst] = true
	if vs := c.counting[inst]; vs != nil {
		delete(vs, vk)
		if len(vs) == 0 {
			delete(c.counting, inst)
		}
	}
	for _, a := range v.addrs {
		c.touch(out, a)
		delete(c.byAddr[a].vmis, vk)
		c.drop(a)
	}
}

// Affected collects the instance keys whose resolution may have changed
// (Claims' own changes, and a store's that add to them).
type Affected map[string]bool

// touch adds every instance claiming a.
func (c *Claims) touch(out Affected, a netip.Addr) {
	cl := c.byAddr[a]
	if cl == nil {
		return
	}
	for k := range cl.spec {
		out[k] = true
	}
	for _, k := range cl.vmis {
		out[k] = true
	}
}

func (c *Claims) at(a netip.Addr) *claim {
	cl := c.byAddr[a]
	if cl == nil {
		cl = &claim{spec: map[string]bool{}, vmis: map[string]string{}}
		c.byAddr[a] = cl
	}
	return cl
}

func (c *Claims) drop(a netip.Addr) {
	if cl := c.byAddr[a]; cl != nil && len(cl.spec) == 0 && len(cl.vmis) == 0 {
		delete(c.byAddr, a)
	}
}

// SetSpec records the addresses instance key's spec lists (nil: the
// instance is gone, or lists none) and returns the instances whose
// resolution may have changed.
func (c *Claims) SetSpec(key string, addrs []netip.Addr) []string {
	out := Affected{key: true}
	for _, a := range c.specs[key] {
		c.touch(out, a)
		delete(c.byAddr[a].spec, key)
		c.drop(a)
	}
	delete(c.specs, key)
	delete(c.refused, key)
	ns, _, _ := strings.Cut(key, "/")
	kept, errs := c.policy.filter(ns, addrs)
	if errs != nil {
		c.refused[key] = errs
	}
	if len(kept) > 0 {
		c.specs[key] = kept
	}
	for _, a := range kept {
		c.at(a).spec[key] = true
		c.touch(out, a)
	}
	return out.Keys()
}

// SetVMI records a VirtualMachineInstance (nil: key is gone) and returns
// the instances whose resolution may have changed.
func (c *Claims) SetVMI(key string, u *unstructured.Unstructured) []string {
	out := Affected{}
	if old, had := c.vmis[key]; had {
		c.uncount(out, key, old, c.effective(key, old))
		delete(c.vmis, key)
	}
	if u != nil {
		v := vmiOf(u)
		c.vmis[key] = v
		c.count(key, v, c.effective(key, v))
		out[c.effective(key, v)] = true
		for _, a := range v.addrs {
			c.touch(out, a)
		}
	}
	return out.Keys()
}

// SetVM records the Instance a VirtualMachine names (u nil: key is gone),
// which its VMI (of the same name) counts for when it names none itself,
// and returns the instances whose resolution may have changed.
func (c *Claims) SetVM(key string, u *unstructured.Unstructured) []string {
	name := ""
	if u != nil {
		name = v1alpha1.InstanceNamedBy(u)
	}
	return c.NameVM(key, name)
}

// NameVM records that VirtualMachine key names the Instance called
// instance in its namespace ("": none), as SetVM does from the object: a
// node agent learns it from the controller's word (an Instance's
// status.virtualMachines, node.go) rather than a watch of every VM.
func (c *Claims) NameVM(key, instance string) []string {
	out := Affected{}
	v, hasVMI := c.vmis[key]
	if hasVMI {
		c.uncount(out, key, v, c.effective(key, v))
	}
	if ns, _, _ := strings.Cut(key, "/"); instance == "" {
		delete(c.vms, key)
	} else {
		c.vms[key] = Key(ns, instance)
	}
	if hasVMI {
		c.count(key, v, c.effective(key, v))
		out[c.effective(key, v)] = true
		for _, a := range v.addrs {
			c.touch(out, a)
		}
	}
	return out.Keys()
}

// VMNames returns the Instance key VirtualMachine key names, as recorded
// ("" for none).
func (c *Claims) VMNames(key string) string { return c.vms[key] }

// Counting returns the VMIs (namespace/name) whose addresses count for
// instance key: those naming it, and those whose VM names it. The
// controller labels the Instance with their nodes.
func (c *Claims) Counting(key string) []string {
	return slices.Sorted(maps.Keys(c.counting[key]))
}

// effective is the instance a VMI's addresses count for: the one it
// names, else the one its VirtualMachine names.
func (c *Claims) effective(vmiKey string, v vmi) string {
	if v.instance != "" {
		return v.instance
	}
	return c.vms[vmiKey]
}

// Keys are the keys collected, sorted, less the empty one.
func (out Affected) Keys() []string {
	keys := make([]string, 0, len(out))
	for k := range out {
		if k != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// Resolution is what Resolve decides for one instance.
type Resolution struct {
	// Addresses are those the instance is served at, sorted.
	Addresses []netip.Addr
	// Problems say why an address it claims is not among them: a spec
	// address the AddressPolicy refuses, or a conflict. They name another
	// Instance only when it is in the same namespace: a tenant learns
	// nothing of another tenant's objects.
	Problems spec.Errors
	// Conflicts are the addresses it claims that are served to nobody
	// because another claims them with equal rank.
	Conflicts []netip.Addr
}

// Resolve returns who instance key is served to.
func (c *Claims) Resolve(key string) Resolution {
	r := Resolution{Problems: slices.Clone(c.refused[key])}
	mine := map[netip.Addr]bool{}
	for _, a := range c.specs[key] {
		mine[a] = true
	}
	for vk := range c.counting[key] {
		for _, a := range c.vmis[vk].addrs {
			if c.unservable != nil && c.unservable(a) {
				r.Problems = append(r.Problems, &spec.FieldError{Field: "status.interfaces", Message: fmt.Sprintf(
					"%s, which VirtualMachineInstance %s reports, is an address the server never serves (loopback, or a trusted proxy's)", a, vk)})
				continue
			}
			mine[a] = true
		}
	}
	addrs := make([]netip.Addr, 0, len(mine))
	for a := range mine {
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	for _, a := range addrs {
		owner, problem, conflict := c.owner(key, a)
		switch {
		case owner == key:
			r.Addresses = append(r.Addresses, a)
		default:
			r.Problems = append(r.Problems, &spec.FieldError{Field: "spec.metadataServer.addresses", Message: problem})
			if conflict {
				r.Conflicts = append(r.Conflicts, a)
			}
		}
	}
	return r
}

// owner is the instance address a is served to, "" for nobody; for an
// instance key that claims a but is not served there, why, and whether
// that is a conflict of equal claims.
func (c *Claims) owner(key string, a netip.Addr) (owner, problem string, conflict bool) {
	cl := c.byAddr[a]
	if len(cl.vmis) > 0 {
		var insts []string
		nobody := false
		for _, k := range cl.vmis {
			if k == "" {
				nobody = true
			} else if !slices.Contains(insts, k) {
				insts = append(insts, k)
			}
		}
		reported := slices.Contains(insts, key)
		switch {
		case len(insts) == 1 && !nobody:
			if reported {
				return key, "", false
			}
			return insts[0], fmt.Sprintf("%s is reported by the VirtualMachineInstance of %s, and a VMI's address beats one a spec lists: not served to this Instance", a, c.other(key, insts[0])), false
		case !reported:
			return "", fmt.Sprintf("%s is reported by a VirtualMachineInstance that is not this Instance's: not served to this Instance", a), false
		default:
			return "", fmt.Sprintf("%s is reported by the VirtualMachineInstances of this Instance and of %s: served to neither", a, c.others(key, insts, nobody)), true
		}
	}
	specs := make([]string, 0, len(cl.spec))
	for k := range cl.spec {
		specs = append(specs, k)
	}
	if len(specs) == 1 {
		return specs[0], "", false
	}
	slices.Sort(specs)
	return "", fmt.Sprintf("%s is listed by this Instance and by %s: served to neither", a, c.others(key, specs, false)), true
}

// other names instance k to the owner of key: by name in key's own
// namespace, else as "another Instance".
func (c *Claims) other(key, k string) string {
	ns, _, _ := strings.Cut(key, "/")
	if kns, name, _ := strings.Cut(k, "/"); kns == ns {
		return "Instance " + name
	}
	return "another Instance"
}

// others names the claimants of an address other than key, as other does.
func (c *Claims) others(key string, insts []string, nobody bool) string {
	var names []string
	foreign := nobody
	for _, k := range insts {
		switch n := c.other(key, k); {
		case k == key:
		case n == "another Instance":
			foreign = true
		default:
			names = append(names, n)
		}
	}
	if foreign {
		names = append(names, "another Instance")
	}
	return strings.Join(names, " and ")
}

// Record is base, instance key's last good version, as the server serves
// it: at the addresses Resolve gives it, its Revision changed with them.
func (c *Claims) Record(key string, base *registry.Record) *registry.Record {
	addrs := c.Resolve(key).Addresses
	if slices.Equal(addrs, base.Addresses) {
		return base
	}
	h := sha256.New()
	for _, a := range addrs {
		h.Write(a.AsSlice())
	}
	return base.Moved(addrs, base.Revision+"-"+hex.EncodeToString(h.Sum(nil))[:8])
}

// vmiOf reads what the store needs of a VMI: the instance it names by
// annotation, and the addresses of its pod network's interface (at most
// maxReported).
//
// Only the pod network's addresses count: KubeVirt's virt-handler writes
// there the pod's IPs, which the CNI gave the pod, not the guest. The
// addresses of an interface on a secondary (Multus) network, or of one
// only the guest agent reports, are what the guest agent, inside the
// guest, says: a tenant's guest could name another VM's address there.
// A VM reached over a secondary network is identified by a spec address
// inside --spec-addresses, or by name through a trusted proxy.
func vmiOf(u *unstructured.Unstructured) vmi {
	var out vmi
	if name := v1alpha1.InstanceNamedBy(u); name != "" {
		out.instance = Key(u.GetNamespace(), name)
	}
	if c := metav1.GetControllerOfNoCopy(u); c != nil && c.Kind == "VirtualMachine" && c.Name == u.GetName() {
		out.vm = true
	}
	pod, ok := podNetwork(u)
	if !ok {
		return out
	}
	ifaces, _, _ := unstructured.NestedSlice(u.Object, "status", "interfaces")
	for _, i := range ifaces {
		m, _ := i.(map[string]any)
		if name, _ := m["name"].(string); name != pod {
			continue
		}
		// ipAddress is the pod's own first address: virt-handler keeps the
		// pod's addresses over the guest agent's, but fills a family the
		// pod lacks (IPv6 on a single-stack IPv4 pod) from the guest agent.
		// So where the guest agent reported on the interface (its
		// infoSource names it), only the first address's family counts,
		// and a guest cannot claim an address in the family the pod has
		// none of. Where it did not, every address is the pod's: a
		// dual-stack pod's IPv6 address counts too, which its guest's
		// requests for fd00:ec2::254 come from.
		first, err := netip.ParseAddr(stringOf(m["ipAddress"]))
		if err != nil {
			continue
		}
		onePodFamily := strings.Contains(stringOf(m["infoSource"]), "guest-agent")
		ips := []any{m["ipAddress"]}
		if l, ok := m["ipAddresses"].([]any); ok {
			ips = append(ips, l...)
		}
		for _, ip := range ips {
			a, err := netip.ParseAddr(stringOf(ip))
			if err == nil && a.Zone() == "" && (!onePodFamily || a.Unmap().Is4() == first.Unmap().Is4()) && len(out.addrs) < maxReported {
				out.addrs = append(out.addrs, a.Unmap())
			}
		}
	}
	slices.SortFunc(out.addrs, netip.Addr.Compare)
	out.addrs = slices.Compact(out.addrs)
	return out
}

// stringOf is v when it is a string, else "".
func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

// podNetwork returns the name of a VMI's pod network: the first of
// spec.networks[] with a pod source (KubeVirt admits one at most), the
// name its interface has in status.interfaces[]. A network with no
// source at all is not taken for the pod network: KubeVirt's admission
// refuses one.
func podNetwork(u *unstructured.Unstructured) (string, bool) {
	networks, _, _ := unstructured.NestedSlice(u.Object, "spec", "networks")
	for _, n := range networks {
		m, _ := n.(map[string]any)
		if _, isPod := m["pod"].(map[string]any); !isPod {
			continue
		}
		if name, _ := m["name"].(string); name != "" {
			return name, true
		}
	}
	return "", false
}

// VMIs lists the VirtualMachineInstances held, as namespace/name.
func (c *Claims) VMIs() []string { return slices.Collect(maps.Keys(c.vmis)) }

// VMs lists the VirtualMachines held that name an Instance.
func (c *Claims) VMs() []string { return slices.Collect(maps.Keys(c.vms)) }

// Named returns what the VMIs held lead to, as namespace/name: the
// Instances their addresses count for, and the VirtualMachines whose
// annotation would name one (those controlling a VMI that names none
// itself). Node mode follows these alone (node.go).
func (c *Claims) Named() (instances, vms []string) {
	for vk, v := range c.vmis {
		if inst := c.effective(vk, v); inst != "" {
			instances = append(instances, inst)
		}
		if v.instance == "" && v.vm {
			vms = append(vms, vk)
		}
	}
	return instances, vms
}
