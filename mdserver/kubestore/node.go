package kubestore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/mdserver/kuberules"
	"github.com/vminit/vminit/spec"
)

// Node mode (Config.Node): an agent on each node serves the VMs of its
// node, so that what it holds, and what it asks of the API server, grows
// with its node, not with the cluster (docs/design.md, "Node agents
// watch a label"). It watches, in each namespace it serves:
//
//   - the VirtualMachineInstances labelled kubevirt.io/nodeName=NODE
//     (KubeVirt's virt-controller sets the label, and moves it when a
//     migration completes: the watch then delivers the VMI's deletion
//     here and its addition on the target node's agent);
//   - the Instances labelled v1alpha1.NodeLabel(NODE), which the
//     controller (vminit-controller) keeps on each Instance a VMI on
//     the node, or migrating to it, counts for (kuberules.Claims.Counting). Their
//     status.virtualMachines, the controller's word on which VMs name
//     them, resolve the VMIs that name no Instance themselves (their VM's
//     annotation may): no VM is watched for them.
//
// What the labels do not cover (no controller, one that lags, an
// Instance used on more nodes than it carries labels for) is followed by
// name, as the kubelet follows its pods' Secrets: a list and a watch with
// fieldSelector metadata.name=NAME for each Instance the node's VMIs
// lead to, each VirtualMachine controlling such a VMI that names no
// Instance itself, and each ConfigMap those Instances refer to. Those
// followers are bounded together (Config.MaxFollow): a tenant who labels
// VMIs with a node they do not run on cannot make the agent open a watch
// per VMI; the objects refused are logged once each with the reason and
// counted (FollowRefused). Secrets are read by name as in every mode
// (refs.go).
//
// A follower starts when its object becomes wanted and stops when it no
// longer is, its object dropped at once unless the labelled watch holds
// it (follow).

// errNodeWrites refuses writes in node mode: a node agent follows only
// the Instances its node's VMIs name, so it would never see a write of
// another land, and an agent on every node is no place to write from.
var errNodeWrites = errors.New("kubestore: a node agent (--node) serves the Instances its node's VMs name and writes none: write Instances with kubectl, or through a server without --node")

// LabelNodeName is the label KubeVirt puts on a VirtualMachineInstance:
// the node it runs on.
const LabelNodeName = v1alpha1.KubeVirtLabelNodeName

// DefaultMaxFollow bounds, by default, the objects a node agent follows
// by name (Config.MaxFollow): a node runs 110 pods by default (the
// kubelet's maxPods), and each VM may need its Instance, its VM and a
// ConfigMap followed while the controller has not labelled them.
const DefaultMaxFollow = 512

// ListTimeout is how long Open may take to list what cfg serves, given
// least. In node mode it is at least NodeListTimeout, and at least twice
// the time the client's rate limit (cfg.REST.QPS) takes for a list and a
// watch of every object it may follow by name (Config.MaxFollow), so
// that an agent whose node's labels are missing still starts. Outside
// node mode, least.
func ListTimeout(cfg Config, least time.Duration) time.Duration {
	if cfg.Node == "" {
		return least
	}
	least = max(least, NodeListTimeout)
	if cfg.REST == nil || cfg.REST.QPS <= 0 {
		return least
	}
	requests := 2 * (cmp.Or(cfg.MaxFollow, DefaultMaxFollow) + 2) // + the VMIs and the labelled Instances
	return max(least, 2*time.Duration(float64(requests)/float64(cfg.REST.QPS)*float64(time.Second)))
}

// NodeListTimeout is the least time a node agent waits for its first
// lists. Every agent of a cluster starts at once after an upgrade or an
// outage, and an API server without a watch cache reads the whole
// collection from etcd for each agent's label-selected list: an agent
// that gave up would be restarted and list again, adding to the load
// that made it give up (docs/benchmarks.md, "Kubernetes: node agents").
const NodeListTimeout = 5 * time.Minute

// nodeSelector narrows a list or watch to the VMIs of node.
func nodeSelector(node string) func(*metav1.ListOptions) {
	sel := labels.SelectorFromSet(labels.Set{LabelNodeName: node}).String()
	return func(o *metav1.ListOptions) { o.LabelSelector = sel }
}

// labelled narrows a list or watch to the Instances the controller
// labelled with node.
func labelled(node string) func(*metav1.ListOptions) {
	sel := v1alpha1.NodeLabel(node) // exists
	return func(o *metav1.ListOptions) { o.LabelSelector = sel }
}

// byName narrows a list or watch to the object called name.
func byName(name string) func(*metav1.ListOptions) {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	return func(o *metav1.ListOptions) { o.FieldSelector = sel }
}

// nodeFollow is node mode's state: what the labelled watch holds, and
// the followers of what it does not. Its methods are called with the
// Store's mu held.
type nodeFollow struct {
	instances, vms, configMaps *followers
	// max bounds the followers of the three together (Config.MaxFollow).
	max int
	// labelled are the Instances the labelled watch holds; listedVMs,
	// by labelled Instance, the VMs (namespace/name) its
	// status.virtualMachines lists, and namedBy the same the other way
	// round: a VM listed by exactly one is resolved to it (resolved).
	labelled  map[string]bool
	listedVMs map[string][]string
	namedBy   map[string]map[string]bool
	resolved  map[string]string
	refused   atomic.Uint64
	log       *slog.Logger
	node      string
	// ready is set once the labelled watch and the VMIs' have listed
	// (Open): before, every Instance would look unlabelled, and an agent
	// would start a follower for each only to stop it a moment later.
	ready bool
}

// followers follow objects of one resource by name, one Reflector each,
// keyed namespace/name.
type followers struct {
	kind    string // for the log
	run     func(ctx context.Context, key string, live func() bool) <-chan struct{}
	ctx     context.Context
	running map[string]*followed
	// refused are the wanted keys not followed for want of room, each
	// logged once.
	refused map[string]bool
}

type followed struct {
	stop   context.CancelFunc
	synced <-chan struct{}
}

func newNodeFollow(s *Store, ctx context.Context) *nodeFollow {
	mk := func(kind string, run func(ctx context.Context, key string, live func() bool) <-chan struct{}) *followers {
		return &followers{kind: kind, run: run, ctx: ctx, running: map[string]*followed{}, refused: map[string]bool{}}
	}
	return &nodeFollow{
		max: cmp.Or(s.cfg.MaxFollow, DefaultMaxFollow), log: s.log, node: s.cfg.Node,
		labelled: map[string]bool{}, listedVMs: map[string][]string{}, namedBy: map[string]map[string]bool{}, resolved: map[string]string{},
		instances: mk("Instance", func(ctx context.Context, key string, live func() bool) <-chan struct{} {
			ns, name, _ := strings.Cut(key, "/")
			return s.watch(ctx, v1alpha1.GroupVersionResource, ns, byName(name), &sink{ns: ns, key: key, put: s.putInstances, live: live})
		}),
		vms: mk("VirtualMachine", func(ctx context.Context, key string, live func() bool) <-chan struct{} {
			ns, name, _ := strings.Cut(key, "/")
			return s.watch(ctx, v1alpha1.KubeVirtVirtualMachines, ns, byName(name), &sink{ns: ns, key: key, put: s.putVMs, live: live})
		}),
		configMaps: mk("ConfigMap", func(ctx context.Context, key string, _ func() bool) <-chan struct{} {
			// A stopped ConfigMap follower's late event decodes again only
			// the Instances still referring to it: nothing to guard.
			ns, name, _ := strings.Cut(key, "/")
			return s.watchRefs(ctx, spec.RefConfigMap, ns, name)
		}),
	}
}

// labelledSink is the sink of namespace ns's labelled Instances: a list
// replaces only the Instances it held (the followers' are theirs), and
// each object held is noted (track).
func (n *nodeFollow) labelledSink(s *Store, ns string) *sink {
	return &sink{ns: ns, put: s.putInstances, holds: func(key string) bool { return n.labelled[key] }, track: n.track}
}

// track notes that the labelled watch holds Instance key as u (nil: no
// longer), and the VMs its status says name it.
func (n *nodeFollow) track(key string, u *unstructured.Unstructured) {
	for _, vm := range n.listedVMs[key] {
		delete(n.namedBy[vm], key)
		if len(n.namedBy[vm]) == 0 {
			delete(n.namedBy, vm)
		}
	}
	delete(n.listedVMs, key)
	if u == nil {
		delete(n.labelled, key)
		return
	}
	n.labelled[key] = true
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "virtualMachines")
	for _, e := range list {
		name, _ := e.(map[string]any)["name"].(string)
		if name == "" {
			continue
		}
		vm := kuberules.Key(u.GetNamespace(), name)
		n.listedVMs[key] = append(n.listedVMs[key], vm)
		if n.namedBy[vm] == nil {
			n.namedBy[vm] = map[string]bool{}
		}
		n.namedBy[vm][key] = true
	}
}

// prune stops following the keys not in want, and returns them.
func (f *followers) prune(want map[string]bool) []string {
	var stopped []string
	for _, k := range slices.Sorted(maps.Keys(f.running)) {
		if !want[k] {
			f.running[k].stop()
			delete(f.running, k)
			stopped = append(stopped, k)
		}
	}
	maps.DeleteFunc(f.refused, func(k string, _ bool) bool { return !want[k] })
	return stopped
}

// grow follows the keys of want not followed yet, in order, while room
// lasts; the others are refused, each logged and counted once.
func (f *followers) grow(want map[string]bool, room *int, n *nodeFollow) {
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if f.running[k] != nil {
			continue
		}
		if *room <= 0 {
			if !f.refused[k] {
				f.refused[k] = true
				n.refused.Add(1)
				n.log.Warn("kubestore: node agent refuses to follow an object by name: its VMs here are not served until the controller labels what they use for this node",
					"kind", f.kind, "object", k, "reason", fmt.Sprintf(
						"not covered by the node's label %s (is vminit-controller running, with KubeVirt?), and the agent already follows %d objects by name, its bound (--node-max-follow)",
						v1alpha1.NodeLabel(n.node), n.max))
			}
			continue
		}
		*room--
		delete(f.refused, k)
		ctx, cancel := context.WithCancel(f.ctx)
		fw := &followed{stop: cancel}
		f.running[k] = fw
		fw.synced = f.run(ctx, k, func() bool { return f.running[k] == fw })
	}
}

// follow makes node mode's followers those the objects held lead to and
// the labelled watch does not hold, drops the objects no longer wanted,
// and returns the instances whose resolution that may have changed.
// Called with s.mu held, after every change; a no-op outside node mode.
func (s *Store) follow() []string {
	n := s.node
	if n == nil || !n.ready {
		return nil
	}
	out := kuberules.Affected{}
	add := func(keys []string) {
		for _, k := range keys {
			out[k] = true
		}
	}
	// VMs: the controller's word (a labelled Instance's status) where it
	// is one, else a follower.
	_, named := s.claims.Named()
	resolved := map[string]string{}
	wantVMs := map[string]bool{}
	for _, vk := range named {
		if by := n.namedBy[vk]; len(by) == 1 {
			for inst := range by {
				resolved[vk] = inst
			}
		} else {
			wantVMs[vk] = true
		}
	}
	for vk := range n.resolved {
		if _, ok := resolved[vk]; !ok {
			add(s.claims.NameVM(vk, ""))
		}
	}
	for vk, inst := range resolved {
		if s.claims.VMNames(vk) != inst {
			_, name, _ := strings.Cut(inst, "/")
			add(s.claims.NameVM(vk, name))
		}
	}
	n.resolved = resolved
	for _, k := range n.vms.prune(wantVMs) {
		if _, ok := resolved[k]; !ok {
			add(s.claims.SetVM(k, nil))
		}
	}
	instances, _ := s.claims.Named()
	wantInstances := map[string]bool{}
	for _, k := range instances {
		if !n.labelled[k] {
			wantInstances[k] = true
		}
	}
	for _, k := range n.instances.prune(wantInstances) {
		if s.instances[k] != nil && !n.labelled[k] {
			add(s.forget(k))
		}
	}
	wantConfigMaps := map[string]bool{}
	prefix := spec.RefConfigMap + "/"
	for _, ref := range s.refDeps.Objects() {
		if key, ok := strings.CutPrefix(ref, prefix); ok {
			wantConfigMaps[key] = true
		}
	}
	n.configMaps.prune(wantConfigMaps)
	room := n.max - len(n.vms.running) - len(n.instances.running) - len(n.configMaps.running)
	n.vms.grow(wantVMs, &room, n)
	n.instances.grow(wantInstances, &room, n)
	n.configMaps.grow(wantConfigMaps, &room, n)
	return out.Keys()
}

// settle starts following what the labelled watch and the VMIs' first
// lists (applied) leave uncovered, and waits until every follower has
// listed its object, those their objects lead to included, or ctx ends:
// Open returns a store with its node's VMs served.
func (n *nodeFollow) settle(ctx context.Context, s *Store) error {
	if n == nil {
		return nil
	}
	s.mu.Lock()
	n.ready = true
	s.apply(nil, s.follow())
	s.mu.Unlock()
	for {
		var pending []<-chan struct{}
		s.mu.Lock()
		for _, f := range []*followers{n.vms, n.instances, n.configMaps} {
			for _, fw := range f.running {
				if !isClosed(fw.synced) {
					pending = append(pending, fw.synced)
				}
			}
		}
		s.mu.Unlock()
		if len(pending) == 0 {
			return nil
		}
		for _, c := range pending {
			select {
			case <-c:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// Following returns how many objects node mode follows by name: the
// Instances, VirtualMachines and ConfigMaps (each a watch of its own,
// Config.MaxFollow together); zeros outside node mode.
func (s *Store) Following() (instances, vms, configMaps int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.node == nil {
		return 0, 0, 0
	}
	return len(s.node.instances.running), len(s.node.vms.running), len(s.node.configMaps.running)
}

// FollowRefused counts the objects node mode refused to follow by name
// for want of room (Config.MaxFollow), each once while it stays wanted.
func (s *Store) FollowRefused() uint64 {
	if s.node == nil {
		return 0
	}
	return s.node.refused.Load()
}
