package kubestore

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/spec"
)

// Node mode (Config.Node): an agent on each node serves the VMs of its
// node, so that what it holds, and what it asks of the API server, grows
// with its node, not with the cluster (docs/design.md, "Node agents
// follow by name"). It watches:
//
//   - the VirtualMachineInstances labelled kubevirt.io/nodeName=NODE
//     (KubeVirt's virt-controller sets the label, and moves it when a
//     migration completes: the watch then delivers the VMI's deletion
//     here and its addition on the target node's agent);
//   - each Instance those VMIs lead to (Claims.Named), by name: a list
//     and a watch with fieldSelector metadata.name=NAME in its
//     namespace, as the kubelet follows the Secrets and ConfigMaps of
//     its pods;
//   - likewise each VirtualMachine controlling such a VMI that names no
//     Instance itself (its annotation may), and each ConfigMap those
//     Instances refer to. Secrets are read by name as in every mode
//     (refs.go).
//
// A follower starts when its object becomes wanted and stops when it no
// longer is, its object dropped at once (follow).

// errNodeWrites refuses writes in node mode: a node agent follows only
// the Instances its node's VMIs name, so it would never see a write of
// another land, and an agent on every node is no place to write from.
var errNodeWrites = errors.New("kubestore: a node agent (--node) serves the Instances its node's VMs name and writes none: write Instances with kubectl, or through a server without --node")

// LabelNodeName is the label KubeVirt puts on a VirtualMachineInstance:
// the node it runs on.
const LabelNodeName = "kubevirt.io/nodeName"

// nodeSelector narrows a list or watch to the VMIs of node.
func nodeSelector(node string) func(*metav1.ListOptions) {
	sel := labels.SelectorFromSet(labels.Set{LabelNodeName: node}).String()
	return func(o *metav1.ListOptions) { o.LabelSelector = sel }
}

// byName narrows a list or watch to the object called name.
func byName(name string) func(*metav1.ListOptions) {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	return func(o *metav1.ListOptions) { o.FieldSelector = sel }
}

// nodeFollow are node mode's followers, one set per resource followed by
// name. Its methods are called with the Store's mu held.
type nodeFollow struct {
	instances, vms, configMaps *followers
}

// followers follow objects of one resource by name, one Reflector each,
// keyed namespace/name.
type followers struct {
	run     func(ctx context.Context, key string, live func() bool) <-chan struct{}
	ctx     context.Context
	running map[string]*followed
}

type followed struct {
	stop   context.CancelFunc
	synced <-chan struct{}
}

func newNodeFollow(s *Store, ctx context.Context) *nodeFollow {
	mk := func(run func(ctx context.Context, key string, live func() bool) <-chan struct{}) *followers {
		return &followers{run: run, ctx: ctx, running: map[string]*followed{}}
	}
	return &nodeFollow{
		instances: mk(func(ctx context.Context, key string, live func() bool) <-chan struct{} {
			ns, name, _ := strings.Cut(key, "/")
			return s.watch(ctx, v1alpha1.GroupVersionResource, ns, byName(name), &sink{ns: ns, key: key, put: s.putInstances, live: live})
		}),
		vms: mk(func(ctx context.Context, key string, live func() bool) <-chan struct{} {
			ns, name, _ := strings.Cut(key, "/")
			return s.watch(ctx, v1alpha1.KubeVirtVirtualMachines, ns, byName(name), &sink{ns: ns, key: key, put: s.putVMs, live: live})
		}),
		configMaps: mk(func(ctx context.Context, key string, _ func() bool) <-chan struct{} {
			// A stopped ConfigMap follower's late event decodes again only
			// the Instances still referring to it: nothing to guard.
			ns, name, _ := strings.Cut(key, "/")
			return s.watchRefs(ctx, spec.RefConfigMap, ns, name)
		}),
	}
}

// set makes the followed objects those of want, and returns the keys it
// stopped following.
func (f *followers) set(want []string) []string {
	wanted := make(map[string]bool, len(want))
	for _, k := range want {
		wanted[k] = true
	}
	var stopped []string
	for _, k := range slices.Sorted(maps.Keys(f.running)) {
		if !wanted[k] {
			f.running[k].stop()
			delete(f.running, k)
			stopped = append(stopped, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(wanted)) {
		if f.running[k] != nil {
			continue
		}
		ctx, cancel := context.WithCancel(f.ctx)
		fw := &followed{stop: cancel}
		f.running[k] = fw
		fw.synced = f.run(ctx, k, func() bool { return f.running[k] == fw })
	}
	return stopped
}

// follow makes node mode's followers those the objects held lead to,
// drops the objects no longer followed, and returns the instances whose
// resolution that may have changed. Called with s.mu held, after every
// change; a no-op outside node mode.
func (s *Store) follow() []string {
	n := s.node
	if n == nil {
		return nil
	}
	out := affected{}
	_, vms := s.claims.Named()
	for _, k := range n.vms.set(vms) {
		for _, a := range s.claims.SetVM(k, nil) {
			out[a] = true
		}
	}
	instances, _ := s.claims.Named()
	for _, k := range n.instances.set(instances) {
		if s.instances[k] != nil {
			for _, a := range s.forget(k) {
				out[a] = true
			}
		}
	}
	var configMaps []string
	prefix := spec.RefConfigMap + "/"
	for _, ref := range s.refDeps.Objects() {
		if key, ok := strings.CutPrefix(ref, prefix); ok {
			configMaps = append(configMaps, key)
		}
	}
	n.configMaps.set(configMaps)
	return out.keys()
}

// settle waits until every follower has listed its object, those their
// objects lead to included, or ctx ends: Open returns a store with its
// node's VMs served.
func (n *nodeFollow) settle(ctx context.Context, s *Store) error {
	if n == nil {
		return nil
	}
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
// Instances, VirtualMachines and ConfigMaps (each a watch of its own);
// zeros outside node mode.
func (s *Store) Following() (instances, vms, configMaps int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.node == nil {
		return 0, 0, 0
	}
	return len(s.node.instances.running), len(s.node.vms.running), len(s.node.configMaps.running)
}
