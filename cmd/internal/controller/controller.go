// Package controller is vminit-controller (cmd/vminit-controller): it
// reconciles vminit's Instance objects and KubeVirt VirtualMachines in a
// cluster.
//
//   - Instance: its spec document (v1alpha1.SpecDocumentOf) is loaded and
//     checked as `vminit validate` checks a spec file (spec.Parse, then
//     render.Instance), rendered for its agent, and the result written to
//     its status: the Valid, Rendered and Served conditions (problems listed
//     with their field paths), the sha256 of each rendered file (none
//     for an Instance that reads a Secret: readsSecret), the VMs that use
//     it. Events say when that changes. The Secrets and
//     ConfigMaps its spec refers to are read in its own namespace
//     (kuberules.Refs), a missing one is Valid's MissingReference, and a
//     change of one loads and renders it again (refs.go).
//   - VirtualMachine that names an Instance (annotation vminit.dev/instance)
//     or carries a cloud-init volume or the kubevirt.io/ignitiondata
//     annotation (read by platform/kubevirt, as `vminit convert` reads it):
//     the guest's user data and network data are written to a Secret of
//     its own (keys userdata and networkdata, what KubeVirt's secretRef and
//     networkDataSecretRef read), owned by the VM and rewritten only when
//     its bytes change. The data of a VM naming an Instance reports the
//     guest's first boot (Config.ReportURL), so that the Instance's
//     status.firstBoot follows it. With PatchVMs the VM's cloud-init volume is pointed
//     at the Secret (what it replaced is kept in an annotation, and put
//     back when the VM no longer names an Instance); otherwise an Event on
//     the VM and the Instance's status name the Secret to reference.
//
// Deleting an Instance or a VM removes the Secrets the controller made for
// it (and undoes its patch); objects it did not make are never written.
//
// Replicas elect a leader on a Lease; only the leader watches and writes.
// Written on client-go's informers and work queue rather than
// controller-runtime: docs/design.md, "The Kubernetes controller", says
// why.
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/internal/lib/revindex"
	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/mdserver/kuberules"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/cluster"
	"github.com/vminit/vminit/spec"
)

// Labels and annotations on what the controller makes.
const (
	// LabelManagedBy marks the Secrets the controller made (value
	// "vminit"); nothing without it is written or deleted.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	managedBy      = "vminit"
	// LabelVirtualMachine names the VM a Secret is for.
	LabelVirtualMachine = "vminit.dev/virtual-machine"
	// AnnotationPatched, on a VM the controller patched (PatchVMs), keeps
	// what the patch replaced (JSON), so that it can be undone and the
	// VM's own first-boot data still be read.
	AnnotationPatched = "vminit.dev/patched"
	// SecretSuffix makes a VM's Secret name: <vm>-vminit.
	SecretSuffix = "-vminit"
)

// Config configures a Controller.
type Config struct {
	// REST is the API server's client configuration (its QPS and Burst
	// bound the controller's writes).
	REST *rest.Config
	// Namespaces are reconciled; empty: every namespace (which needs a
	// ClusterRoleBinding).
	Namespaces []string
	// KubeVirt reconciles VirtualMachines too (the KubeVirt CRDs must
	// exist).
	KubeVirt bool
	// PatchVMs points each VM's cloud-init volume at the Secret made for
	// it.
	PatchVMs bool
	// Workers reconcile in parallel; default 4.
	Workers int
	// LeaderElection, when its Namespace is set, makes replicas elect one
	// leader on a Lease; only the leader reconciles.
	LeaderElection LeaderElection
	// Resync re-reconciles everything this often (0: never; changes are
	// watched).
	Resync time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Addresses are the addresses Instances' specs may claim: the
	// servers' (kubestore.Config.Addresses), so that Served says what
	// they do.
	Addresses kuberules.AddressPolicy
	// ReportURL is the base URL (bootreport.ParseBaseURL) the guests of
	// the VMs naming an Instance report their first boot to: their
	// Secret's user data carries cloud-init's reporting webhook and
	// report unit, an Ignition config its completion unit (render.Target's
	// ReportTo, as `vminit build --report-to` renders them). Default
	// DefaultReportURL. NoBootReports leaves the report out.
	ReportURL     string
	NoBootReports bool
}

// DefaultReportURL is where a KubeVirt guest reports its first boot when
// Config.ReportURL is unset: the link-local address of its node's agent
// (`vminit serve --kubernetes --node`), which the node's data path takes
// the guest's packets to, leaving the pod as the VMI's pod address, by
// which the agent knows the Instance (docs/kubernetes.md, "How a guest
// reaches vminit"). No host of the controller's own goes into a Secret:
// the same Instance renders the same bytes wherever the controller runs.
const DefaultReportURL = "http://169.254.169.254"

// LeaderElection configures the Lease replicas elect a leader on.
type LeaderElection struct {
	Namespace, Name string
	// Identity names this replica in the Lease; default the host name.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod default to 15 s, 10 s
	// and 2 s, as Kubernetes' own controllers use.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Controller reconciles Instances and VirtualMachines.
type Controller struct {
	cfg     Config
	log     *slog.Logger
	dyn     dynamic.Interface
	kube    kubernetes.Interface
	meta    metadata.Interface
	metrics *Metrics
	// resolver reads the Secrets a VM's cloud-init volume refers to.
	resolver platform.Resolver
	// reportTo is the base URL the Secrets of VMs naming an Instance
	// report the first boot to, "" for none (Config.NoBootReports).
	reportTo string

	leader atomic.Bool
	synced atomic.Bool

	mu      sync.Mutex
	started bool
}

// New returns a Controller; Run starts it.
func New(cfg Config) (*Controller, error) {
	if cfg.REST == nil {
		return nil, errors.New("controller: no client configuration")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	le := &cfg.LeaderElection
	if le.Name == "" {
		le.Name = "vminit-controller"
	}
	if le.Identity == "" {
		host, _ := os.Hostname()
		le.Identity = host
	}
	le.LeaseDuration = orDefault(le.LeaseDuration, 15*time.Second)
	le.RenewDeadline = orDefault(le.RenewDeadline, 10*time.Second)
	le.RetryPeriod = orDefault(le.RetryPeriod, 2*time.Second)
	c := &Controller{cfg: cfg, log: cfg.Logger.With("component", "controller"), metrics: newMetrics()}
	var err error
	if !cfg.NoBootReports {
		url := cfg.ReportURL
		if url == "" {
			url = DefaultReportURL
		}
		if c.reportTo, err = bootreport.ParseBaseURL(url); err != nil {
			return nil, fmt.Errorf("controller: ReportURL %q: %w", url, err)
		}
	}
	if c.dyn, err = dynamic.NewForConfig(cfg.REST); err != nil {
		return nil, err
	}
	if c.kube, err = kubernetes.NewForConfig(cfg.REST); err != nil {
		return nil, err
	}
	if c.meta, err = metadata.NewForConfig(cfg.REST); err != nil {
		return nil, err
	}
	if c.resolver, err = cluster.New(cfg.REST); err != nil {
		return nil, err
	}
	return c, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Run reconciles until ctx ends. With leader election it first waits to
// be elected; a leader that loses its Lease (the API server unreachable
// past the renew deadline) stops reconciling and stands for election
// again.
func (c *Controller) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return errors.New("controller: Run called twice")
	}
	c.started = true
	c.mu.Unlock()
	le := c.cfg.LeaderElection
	if le.Namespace == "" {
		c.leader.Store(true)
		c.metrics.leader.Store(1)
		return c.lead(ctx)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     c.kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	for ctx.Err() == nil {
		var runErr error
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, Name: le.Name, ReleaseOnCancel: true,
			LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					c.log.Info("leading", "lease", le.Namespace+"/"+le.Name, "identity", le.Identity)
					c.leader.Store(true)
					c.metrics.leader.Store(1)
					runErr = c.lead(ctx)
				},
				OnStoppedLeading: func() {
					c.leader.Store(false)
					c.synced.Store(false)
					c.metrics.leader.Store(0)
				},
				OnNewLeader: func(id string) {
					if id != le.Identity {
						c.log.Info("standing by", "leader", id)
					}
				},
			},
		})
		if err != nil {
			return fmt.Errorf("controller: leader election: %w", err)
		}
		elector.Run(ctx)
		if runErr != nil && ctx.Err() == nil {
			return runErr
		}
		if ctx.Err() == nil {
			c.log.Warn("lost the lease; standing for election again", "lease", le.Namespace+"/"+le.Name)
		}
	}
	return nil
}

// IsLeader reports whether this replica reconciles now.
func (c *Controller) IsLeader() bool { return c.leader.Load() }

// Handler serves /metrics (Prometheus), /healthz (the process runs) and
// /readyz (a replica standing by, or a leader whose caches are synced).
func (c *Controller) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", c.metrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if c.leader.Load() && !c.synced.Load() {
			http.Error(w, "leading; caches not synced yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// key is a work item: an object to reconcile.
type key struct {
	kind      byte // kindInstance or kindVM
	namespace string
	name      string
}

const (
	kindInstance byte = 'i'
	kindVM       byte = 'v'
)

func (k key) String() string { return k.namespace + "/" + k.name }

// term is what one leadership term runs: informers, a queue, and the
// state the reconcilers keep.
type term struct {
	c        *Controller
	queue    workqueue.TypedRateLimitingInterface[key]
	recorder record.EventRecorder

	instances map[string]cache.SharedIndexInformer // by namespace ("" = all)
	vms       map[string]cache.SharedIndexInformer
	vmis      map[string]cache.SharedIndexInformer // what vmiAddresses keeps
	secrets   map[string]cache.SharedIndexInformer // metadata only

	mu     sync.Mutex
	claims *kuberules.Claims  // the metadata servers' rule: who is served where
	loaded map[string]*loaded // each Instance's document, loaded and checked
	deps   revindex.Index     // Secret namespace/name → the VMs whose data read it
	// refDeps: a Secret or ConfigMap (kuberules.RefKey) → the Instances (namespace/
	// name) whose spec refers to it.
	refDeps revindex.Index
}

// indexInstance indexes VMs by the Instance they name.
const indexInstance = "instance"

// lead runs one leadership term: informers, then workers, until ctx ends.
func (c *Controller) lead(ctx context.Context) error {
	t := &term{c: c, instances: map[string]cache.SharedIndexInformer{}, vms: map[string]cache.SharedIndexInformer{},
		vmis: map[string]cache.SharedIndexInformer{}, secrets: map[string]cache.SharedIndexInformer{}, loaded: map[string]*loaded{},
		claims: kuberules.NewClaims(c.cfg.Addresses, nil)}
	t.queue = workqueue.NewTypedRateLimitingQueueWithConfig(retryLimiter(),
		workqueue.TypedRateLimitingQueueConfig[key]{Name: "vminit"})
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	t.recorder = broadcaster.NewRecorder(runtime.NewScheme(), corev1.EventSource{Component: "vminit-controller"})

	namespaces := c.cfg.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	var all []cache.SharedIndexInformer
	for _, ns := range namespaces {
		all = append(all, t.informers(ns)...)
	}
	// The handlers enqueue nothing until the first batch below is in: the
	// Index sees every Instance at once, in creation order, as a metadata
	// server's first list does.
	var wg sync.WaitGroup
	defer wg.Wait()
	defer t.queue.ShutDown()
	for _, inf := range all {
		wg.Go(func() { inf.RunWithContext(ctx) })
	}
	for _, inf := range all {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return nil // ctx ended
		}
	}
	t.loadAll(ctx)
	c.synced.Store(true)
	c.log.Info("caches synced; reconciling", "namespaces", c.cfg.Namespaces, "kubevirt", c.cfg.KubeVirt, "patch_vms", c.cfg.PatchVMs, "boot_reports_to", c.reportTo)
	for range c.cfg.Workers {
		wg.Go(func() {
			for t.work(ctx) {
			}
		})
	}
	<-ctx.Done()
	return nil
}

// informers makes the informers of namespace ns, their handlers feeding
// the term: Instances, the Secrets and ConfigMaps their specs may refer
// to (metadata only), and with KubeVirt the VMs (indexed by the Instance
// they name) and VMIs (for their addresses), in the order they are to
// start.
func (t *term) informers(ns string) []cache.SharedIndexInformer {
	ii := dynamicinformer.NewFilteredDynamicInformer(t.c.dyn, v1alpha1.GroupVersionResource, ns, t.c.cfg.Resync, cache.Indexers{}, nil).Informer()
	ii.SetTransform(dropManagedFields)
	ii.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.instanceChanged(obj) },
		UpdateFunc: func(_, obj any) { t.instanceChanged(obj) },
		DeleteFunc: func(obj any) { t.instanceChanged(obj) },
	})
	t.instances[ns] = ii
	si := t.refInformer(ns, spec.RefSecret, t.secretChanged)
	t.secrets[ns] = si
	ci := t.refInformer(ns, spec.RefConfigMap, nil)
	if !t.c.cfg.KubeVirt {
		return []cache.SharedIndexInformer{ii, si, ci}
	}
	vi := dynamicinformer.NewFilteredDynamicInformer(t.c.dyn, v1alpha1.KubeVirtVirtualMachines, ns, t.c.cfg.Resync,
		cache.Indexers{indexInstance: vmInstanceIndex}, nil).Informer()
	vi.SetTransform(dropManagedFields)
	vi.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.vmChanged(nil, obj) },
		UpdateFunc: func(old, obj any) { t.vmChanged(old, obj) },
		DeleteFunc: func(obj any) { t.vmChanged(nil, obj) },
	})
	t.vms[ns] = vi
	// The VMIs' addresses decide where an Instance is served.
	mi := dynamicinformer.NewFilteredDynamicInformer(t.c.dyn, v1alpha1.KubeVirtVirtualMachineInstances, ns, t.c.cfg.Resync, cache.Indexers{}, nil).Informer()
	mi.SetTransform(vmiAddresses)
	mi.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.vmiChanged(obj, false) },
		UpdateFunc: func(_, obj any) { t.vmiChanged(obj, false) },
		DeleteFunc: func(obj any) { t.vmiChanged(obj, true) },
	})
	t.vmis[ns] = mi
	return []cache.SharedIndexInformer{ii, si, ci, mi, vi}
}

// retryLimiter spaces the retries of an object whose reconcile failed (a
// status the API server refuses, a Secret it may not write): retryFirst,
// then twice as long at each failure, up to retryMax, until a reconcile
// succeeds. client-go's default starts at 5 ms, a dozen writes in an
// object's first seconds. The client's QPS bounds all writes together,
// and a change of the object (its informer's event) is reconciled at
// once, whatever the backoff.
func retryLimiter() workqueue.TypedRateLimiter[key] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[key](retryFirst, retryMax)
}

const (
	retryFirst = time.Second
	retryMax   = 5 * time.Minute
)

// vmiAddresses keeps of a VMI what kuberules.Claims reads: its
// annotations, the names of its spec.networks and which is the pod
// network (only that network's interface counts), and status.interfaces;
// and the labels that say its nodes (v1alpha1.NodesOf), which its
// Instance's node labels follow (nodes.go). A VMI's spec and the rest of its status are most of it, and a cluster
// may run thousands.
func vmiAddresses(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind()}}
	out.SetNamespace(u.GetNamespace())
	out.SetName(u.GetName())
	out.SetUID(u.GetUID())
	out.SetResourceVersion(u.GetResourceVersion())
	out.SetAnnotations(u.GetAnnotations())
	var nodes map[string]string
	for _, k := range []string{v1alpha1.KubeVirtLabelNodeName, v1alpha1.KubeVirtLabelMigrationTargetNode} {
		if v, ok := u.GetLabels()[k]; ok {
			if nodes == nil {
				nodes = map[string]string{}
			}
			nodes[k] = v
		}
	}
	out.SetLabels(nodes)
	if networks, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "networks"); ok {
		out.Object["spec"] = map[string]any{"networks": networkNames(networks)}
	}
	if ifs, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "interfaces"); ok {
		out.Object["status"] = map[string]any{"interfaces": ifs}
	}
	return out, nil
}

// networkNames is a VMI's spec.networks reduced to each network's name
// and, on the pod network, its (emptied) pod source.
func networkNames(networks any) []any {
	list, _ := networks.([]any)
	out := make([]any, 0, len(list))
	for _, n := range list {
		m, _ := n.(map[string]any)
		kept := map[string]any{"name": m["name"]}
		if _, isPod := m["pod"].(map[string]any); isPod {
			kept["pod"] = map[string]any{}
		}
		out = append(out, kept)
	}
	return out
}

// dropManagedFields leaves the server-side apply bookkeeping out of the
// informers' caches: the controller never reads it, and it is often the
// larger part of an object.
func dropManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// work reconciles one key; false when the queue is shut down.
func (t *term) work(ctx context.Context) bool {
	k, quit := t.queue.Get()
	if quit {
		return false
	}
	defer t.queue.Done(k)
	start := time.Now()
	var err error
	switch k.kind {
	case kindInstance:
		err = t.syncInstance(ctx, k.namespace, k.name)
	case kindVM:
		err = t.syncVM(ctx, k.namespace, k.name)
	}
	t.c.metrics.reconciled(k.kind, err, time.Since(start))
	t.c.metrics.depth.Store(int64(t.queue.Len()))
	if err != nil && ctx.Err() == nil {
		t.c.log.Warn("reconcile failed; retrying", "kind", kindName(k.kind), "object", k.String(), "err", err)
		t.queue.AddRateLimited(k)
		return true
	}
	t.queue.Forget(k)
	return true
}

func kindName(k byte) string {
	if k == kindVM {
		return "VirtualMachine"
	}
	return "Instance"
}

// informerFor returns the informer of namespace ns in m.
func informerFor(m map[string]cache.SharedIndexInformer, ns string) cache.SharedIndexInformer {
	if inf, ok := m[ns]; ok {
		return inf
	}
	return m[metav1.NamespaceAll]
}

// get returns the cached object ns/name of the informers in m.
func get(m map[string]cache.SharedIndexInformer, ns, name string) (any, bool) {
	inf := informerFor(m, ns)
	if inf == nil {
		return nil, false
	}
	obj, ok, _ := inf.GetIndexer().GetByKey(ns + "/" + name)
	return obj, ok
}

func metaOf(obj any) (metav1.Object, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	return m, ok
}
