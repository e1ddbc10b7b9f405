package capi

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	"github.com/vminit/vminit/internal/lib/lazyre"
	"github.com/vminit/vminit/platform"
)

// initializes reports whether the machine built runs kubeadm init, as
// Cluster API decides it:
//
//   - a KubeadmConfigTemplate's machines (a MachineDeployment's or a
//     MachinePool's) are no control-plane machines, and CABPK joins every
//     such machine (it waits for the control plane, then joinWorker):
//     they always join, an init configuration there is ignored;
//   - a KubeadmControlPlane(Template) makes its first machine with the
//     init configuration and every later one with the join configuration
//     and joinConfiguration.controlPlane set (KCP's
//     ComputeDesiredKubeadmConfig): Options.PoolIndex 0 is that first
//     machine, the others join;
//   - a KubeadmConfig is one Machine's (machineInitializes).
func (c *conv) initializes() bool {
	switch c.src.role {
	case roleWorkers:
		if c.hasInit() {
			c.b.Warnf(c.initPath(), "ignored: the machines of a KubeadmConfigTemplate (a MachineDeployment's or MachinePool's) always join, as CABPK joins every machine that is not a control-plane machine")
		}
		return false
	case roleControlPlane:
		return c.controlPlaneMachine()
	}
	return c.machineInitializes()
}

// hasInit: the spec has an init or cluster configuration, the first
// control-plane machine's form.
func (c *conv) hasInit() bool {
	return !isZero(c.cs.InitConfiguration) || !isZero(c.cs.ClusterConfiguration)
}

// machineInitializes decides a KubeadmConfig's machine as CABPK decides
// it (bootstrap/kubeadm/reconcilers/kubeadmconfig/kubeadmconfig_controller.go
// at cluster-api v1.14.0), from two things the object does not hold: its
// Machine's role (role: the label cluster.x-k8s.io/control-plane) and its
// Cluster's state (initialized: the condition ControlPlaneInitialized).
// CABPK goes by them alone, whatever configurations the object has:
//
//   - a worker waits until the control plane is initialized, then joins
//     (joinWorker; refused with joinConfiguration.controlPlane,
//     checkControlPlaneJoin): its data is that join whenever it is built;
//   - a control-plane machine of a cluster not initialized inits it
//     (handleClusterNotInitialized, the join configuration ignored), of
//     an initialized one joins its control plane (joinControlplane, which
//     adds joinConfiguration.controlPlane; the init configuration
//     ignored).
//
// Where the role or the state is unsaid, the object's own form is its
// author's word: an init or cluster configuration inits, a join
// configuration joins (the control plane for a control-plane machine, as
// CABPK); an empty object says nothing, and a guess either makes a
// control plane a worker or inits a second control plane, which breaks
// the cluster: an error naming the ways to say it.
func (c *conv) machineInitializes() bool {
	cs := c.cs
	hasInit, empty := c.hasInit(), !c.hasInit() && isZero(cs.JoinConfiguration)
	if _, err := c.ownMachine(); err != nil && c.opts.ControlPlane == nil && !empty {
		return c.ownForm(false) // the cluster cannot say: the object's word stands (unreadMachine warns)
	}
	cp, known := c.role()
	switch {
	case c.noRole:
		return false
	case !known && empty:
		c.refuse("metadata.name", "%s is empty (no init, cluster or join configuration): CABPK makes of it what its Machine is, kubeadm init with its defaults for the cluster's first control-plane Machine (label %s), kubeadm join for a worker, and the object alone does not say which; give its Machine (spec.bootstrap.configRef naming it) in the same input or read it from the cluster with --kubeconfig, or say it with --control-plane (a control-plane machine) or --control-plane=false (a worker)", c.what(), platform.LabelControlPlane)
		return false
	case !known:
		return c.ownForm(false)
	case !cp:
		if hasInit {
			c.b.Warnf(c.initPath(), "ignored: %s, and CABPK joins a worker with the join configuration", c.roleWho(false))
		}
		c.checkControlPlaneJoin()
		return false
	}
	if _, err := c.ownCluster(); err != nil && c.opts.ControlPlaneInitialized == nil && !empty {
		c.b.Warnf("metadata.name", "%v: the object's own configuration decides", err)
		return c.ownForm(true)
	}
	initialized, known := c.initialized()
	switch {
	case c.noRole:
		return false
	case !known && empty:
		c.refuse("metadata.name", "%s is empty, and %s: CABPK inits the cluster with it while the Cluster's control plane is not initialized (its condition %s not True), and joins it to the control plane once it is; nothing says which, and a second kubeadm init breaks a cluster; give its Cluster (%s) in the same input or read it from the cluster with --kubeconfig, or say it with --control-plane-initialized=false (this machine inits the cluster) or --control-plane-initialized (it joins the control plane)", c.what(), c.roleWho(true), platform.ConditionControlPlaneInitialized, c.clusterNamed())
		return false
	case !known:
		return c.ownForm(true)
	case initialized:
		if hasInit {
			c.b.Warnf(c.initPath(), "ignored: %s, and CABPK joins a control-plane machine of an initialized cluster to its control plane with the join configuration", c.clusterWho())
		}
		c.controlPlaneJoin()
		return false
	}
	if !isZero(cs.JoinConfiguration) {
		c.b.Warnf(c.path+".joinConfiguration", "not used: %s, and CABPK inits the cluster with its first control-plane machine (with its defaults where the object has no init configuration)", c.clusterWho())
	}
	return true
}

// ownForm is what the object's own configurations say where nothing
// else does: an init or cluster configuration inits (a join
// configuration beside it is the later machines'), a join configuration
// joins as written, the control plane with joinConfiguration.controlPlane
// or for a control-plane machine (controlPlane), as CABPK's
// joinControlplane adds it.
func (c *conv) ownForm(controlPlane bool) bool {
	if !c.hasInit() {
		if controlPlane || c.cs.JoinConfiguration.ControlPlane != nil {
			c.controlPlaneJoin()
		}
		return false
	}
	if !isZero(c.cs.JoinConfiguration) {
		c.b.Warnf(c.path+".joinConfiguration", "not used: the object also has an init configuration, which the first control-plane machine uses (the others join with this one)")
	}
	return true
}

// role is the role of a KubeadmConfig's machine as its Machine says (one
// in the input, Options.Machines, else the cluster's, Options.FindMachine),
// else --control-plane (Options.ControlPlane); known is false when none
// says (said).
func (c *conv) role() (controlPlane, known bool) {
	m, err := c.ownMachine()
	if err != nil {
		c.machineErrSaid = true
	}
	var who *string
	if m != nil {
		w := c.roleWho(m.ControlPlane)
		who = &w
	}
	return c.said(m != nil && m.ControlPlane, who, err, c.opts.ControlPlane, "--control-plane")
}

// initialized is whether the control plane of a KubeadmConfig's cluster
// is initialized, as its Cluster says (one in the input, Options.Clusters,
// else the cluster's, Options.FindCluster), else
// --control-plane-initialized (Options.ControlPlaneInitialized); known is
// false when none says (said).
func (c *conv) initialized() (yes, known bool) {
	cl, err := c.ownCluster()
	var who *string
	if cl != nil {
		w := c.clusterWho()
		who = &w
	}
	return c.said(cl != nil && cl.Initialized, who, err, c.opts.ControlPlaneInitialized, "--control-plane-initialized")
}

// said decides a yes-or-no of a KubeadmConfig's machine that an object
// read (its Machine, its Cluster) says when who, naming it and what it
// says, is not nil, and flag where none does; known is false when neither
// says. The flag contradicting the object is an error (noRole set); an
// object the cluster could not give (err) leaves the flag to decide, with
// a warning, and without one is an error.
func (c *conv) said(value bool, who *string, err error, flag *bool, flagName string) (v, known bool) {
	switch {
	case err != nil && flag != nil:
		c.b.Warnf("metadata.name", "%v: %s=%t decides", err, flagName, *flag)
		return *flag, true
	case err != nil:
		c.refuse("metadata.name", "%v", err)
		return false, false
	case who != nil && flag != nil && *flag != value:
		c.refuse("metadata.name", "%s=%t, but %s: give one", flagName, *flag, *who)
		return false, false
	case who != nil:
		return value, true
	case flag != nil:
		return *flag, true
	}
	return false, false
}

// refuse adds the error at path that leaves the machine's role or state
// refused or unsaid: no kubeadm command is built.
func (c *conv) refuse(path, format string, args ...any) {
	c.noRole = true
	c.b.Errorf(path, format, args...)
}

// roleWho names what says the machine's role, for messages.
func (c *conv) roleWho(controlPlane bool) string {
	if m := c.machine; m != nil {
		return fmt.Sprintf("its Machine %s (%s) %s", m.Name, m.Where, roleOf(controlPlane))
	}
	return fmt.Sprintf("--control-plane=%t says its machine %s", controlPlane, map[bool]string{true: "is a control-plane machine", false: "is a worker"}[controlPlane])
}

// clusterWho names what says the cluster's state, for messages.
func (c *conv) clusterWho() string {
	cl := c.cluster
	switch {
	case cl == nil:
		return fmt.Sprintf("--control-plane-initialized=%t says its cluster's control plane is%s initialized", *c.opts.ControlPlaneInitialized, map[bool]string{true: "", false: " not"}[*c.opts.ControlPlaneInitialized])
	case cl.Initialized:
		return fmt.Sprintf("its Cluster %s (%s) has its control plane initialized (condition %s True)", cl.Name, cl.Where, platform.ConditionControlPlaneInitialized)
	case !cl.Status:
		return fmt.Sprintf("its Cluster %s (%s) is as written, with no status: one being created, its control plane not initialized (CABPK reads no condition %s as not initialized)", cl.Name, cl.Where, platform.ConditionControlPlaneInitialized)
	}
	return fmt.Sprintf("its Cluster %s (%s) has its control plane not initialized (no condition %s True)", cl.Name, cl.Where, platform.ConditionControlPlaneInitialized)
}

// clusterNamed names the Cluster the machine belongs to, for messages.
func (c *conv) clusterNamed() string {
	if n := c.clusterName(); n != "" {
		return "Cluster " + n
	}
	return "the Cluster its Machine's spec.clusterName names"
}

// clusterName is the name of the KubeadmConfig's Cluster: its Machine's
// (spec.clusterName, else its label), else the object's own label
// cluster.x-k8s.io/cluster-name.
func (c *conv) clusterName() string {
	if m := c.machine; m != nil && m.ClusterName != "" {
		return m.ClusterName
	}
	return c.src.clusterLabel
}

// ownCluster is the KubeadmConfig's Cluster: the one of that name in the
// input (Options.Clusters), or the input's only Cluster of the namespace
// when nothing names one, else the cluster's (Options.FindCluster), else
// nil; err says why the cluster could not give it. It is kept, so the
// cluster is asked once.
func (c *conv) ownCluster() (*platform.Cluster, error) {
	if c.clusterDone {
		return c.cluster, c.clusterErr
	}
	c.clusterDone = true
	name := c.clusterName()
	var inNS []int
	for i, cl := range c.opts.Clusters {
		if cl.Namespace == c.ns && (name == "" || cl.Name == name) {
			inNS = append(inNS, i)
		}
	}
	if len(inNS) == 1 {
		c.cluster = &c.opts.Clusters[inNS[0]]
		return c.cluster, nil
	}
	if c.opts.FindCluster == nil || name == "" {
		return nil, nil
	}
	cl, err := c.opts.FindCluster(c.ctx, c.ns, name)
	if err != nil {
		c.clusterErr = fmt.Errorf("reading the Cluster %s of %s from the cluster: %w", name, c.what(), err)
		return nil, c.clusterErr
	}
	c.cluster = cl
	return cl, nil
}

// checkControlPlaneJoin refuses a KubeadmConfig that joins the control
// plane (joinConfiguration.controlPlane) for a worker's machine, as
// CABPK refuses it: its joinWorker returns "Machine is a Worker, but
// JoinConfiguration.ControlPlane is set in the KubeadmConfig object" and
// the machine gets no bootstrap data
// (bootstrap/kubeadm/reconcilers/kubeadmconfig/kubeadmconfig_controller.go
// line 721 at cluster-api v1.14.0). vminit built a control-plane join
// for it, which kubeadm runs on a machine Cluster API counts as a worker.
func (c *conv) checkControlPlaneJoin() {
	if c.cs.JoinConfiguration.ControlPlane == nil {
		return
	}
	c.refuse(c.path+".joinConfiguration.controlPlane", "%s joins the control plane, but %s: CABPK gives such a machine no bootstrap data (its joinWorker: \"Machine is a Worker, but JoinConfiguration.ControlPlane is set in the KubeadmConfig object\"); label the Machine %s for a control-plane machine, or drop joinConfiguration.controlPlane for a worker", c.what(), c.roleWho(false), platform.LabelControlPlane)
}

// ownMachine is the Machine whose bootstrap config the KubeadmConfig is:
// one in the input (Options.Machines), else the cluster's
// (Options.FindMachine), else nil. err says why the cluster could not be
// asked; it is kept, so the cluster is asked once, and reported where the
// role needs it (role), else by unreadMachine.
func (c *conv) ownMachine() (*platform.Machine, error) {
	if c.machineDone {
		return c.machine, c.machineErr
	}
	c.machineDone = true
	for i, cand := range c.opts.Machines {
		if cand.Config == c.src.name && cand.Namespace == c.ns {
			c.machine = &c.opts.Machines[i]
			return c.machine, nil
		}
	}
	if c.opts.FindMachine != nil {
		found, err := c.opts.FindMachine(c.ctx, c.ns, c.src.name)
		if err != nil {
			c.machineErr = fmt.Errorf("finding the Machine whose bootstrap config is %s in the cluster: %w", c.what(), err)
			return nil, c.machineErr
		}
		c.machine = found
	}
	return c.machine, nil
}

// unreadMachine warns that the cluster could not be asked for the Machine
// when only the machine's name (identity) needed it: the role, which
// would make it an error, was the object's own.
func (c *conv) unreadMachine() {
	if c.machineErr != nil && !c.machineErrSaid {
		c.b.Warnf("metadata.name", "%v: the machine is named after the object", c.machineErr)
	}
}

func roleOf(controlPlane bool) string {
	if controlPlane {
		return "is a control-plane machine (label " + platform.LabelControlPlane + ")"
	}
	return "is no control-plane machine (no label " + platform.LabelControlPlane + ")"
}

// initPath is the field of the init configuration a KubeadmConfig spec
// sets.
func (c *conv) initPath() string {
	if !isZero(c.cs.InitConfiguration) {
		return c.path + ".initConfiguration"
	}
	return c.path + ".clusterConfiguration"
}

// controlPlaneMachine reports whether the KubeadmControlPlane's machine
// Options.PoolIndex inits (the first) and makes the spec the joining
// machines' for the others, as KCP does: no init configuration, and
// joinConfiguration.controlPlane set so that kubeadm joins the control
// plane.
func (c *conv) controlPlaneMachine() bool {
	i := c.opts.PoolIndex
	if i < 0 {
		c.b.Errorf("metadata.name", "--pool-index %d: the machines of %s are numbered from 0 (the first, which KCP makes with the init configuration)", i, c.what())
		return false
	}
	if r := c.src.replicas; r != nil && i >= int(*r) {
		c.b.Errorf("spec.replicas", "%s has %d machines, which KCP numbers from 0; there is no machine %d (--pool-index)", c.what(), *r, i)
		return false
	}
	if i == 0 {
		return true
	}
	c.controlPlaneJoin()
	return false
}

// controlPlaneJoin makes the spec a machine's that joins the control
// plane, as KCP makes its later machines' and CABPK's joinControlplane
// completes one: no init configuration, and joinConfiguration.controlPlane
// set (empty where the object has none) so that kubeadm joins the control
// plane.
func (c *conv) controlPlaneJoin() {
	c.cs.InitConfiguration = bootstrapv1.InitConfiguration{}
	if c.cs.JoinConfiguration.ControlPlane == nil {
		c.cs.JoinConfiguration.ControlPlane = &bootstrapv1.JoinControlPlane{}
	}
	if !slices.ContainsFunc(c.cs.Files, func(f bootstrapv1.File) bool { return f.Path == "/etc/kubernetes/pki/ca.key" }) {
		c.b.Warnf(c.path+".files", "a joining control-plane machine needs the cluster's certificate authorities (/etc/kubernetes/pki/ca.crt and ca.key, sa.key and sa.pub, front-proxy-ca, etcd/ca): CABPK writes them into its data from the Cluster's Secrets, which vminit does not read; give them as files, or kubeadm join --control-plane fails")
	}
}

// bootstrapTokenFormat is kubeadm's bootstrap token: ID.SECRET.
var bootstrapTokenFormat = lazyre.New(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)

// joinDefaults gives a joining machine's configuration the discovery
// CABPK gives it (reconcileDiscovery): a discovery file is kept as
// written; else bootstrap-token discovery, whose endpoint, token and CA
// hashes CABPK takes from the Cluster (spec.controlPlaneEndpoint, a token
// it creates in the workload cluster, the cluster CA's hashes) and vminit
// from Options where the object has none. Without an endpoint or a token
// kubeadm join cannot find the cluster: an error. It reports whether the
// configuration is complete.
func (c *conv) joinDefaults() bool {
	d := &c.cs.JoinConfiguration.Discovery
	p := c.path + ".joinConfiguration.discovery"
	if d.File.IsDefined() {
		return true
	}
	bt := &d.BootstrapToken
	if bt.Token == "" && c.opts.BootstrapToken != "" {
		if !bootstrapTokenFormat.MatchString(c.opts.BootstrapToken) {
			c.b.Errorf(p+".bootstrapToken.token", "--bootstrap-token %q: want kubeadm's token format, [a-z0-9]{6}.[a-z0-9]{16}", c.opts.BootstrapToken)
			return false
		}
		bt.Token = c.opts.BootstrapToken
	}
	bt.APIServerEndpoint = cmp.Or(bt.APIServerEndpoint, c.opts.ControlPlaneEndpoint)
	if len(bt.CACertHashes) == 0 {
		bt.CACertHashes = c.opts.CACertHashes
	}
	var missing []string
	if bt.APIServerEndpoint == "" {
		missing = append(missing, "bootstrapToken.apiServerEndpoint (--control-plane-endpoint HOST:PORT)")
	}
	if bt.Token == "" {
		missing = append(missing, "bootstrapToken.token (--bootstrap-token)")
	}
	if len(missing) > 0 {
		c.b.Errorf(p, "the machine of %s joins its cluster, and kubeadm join has no %s to find it with: CABPK fills bootstrap-token discovery itself from the Cluster (the endpoint from its spec.controlPlaneEndpoint, a token it creates in the workload cluster, the hashes of the cluster's CA), which vminit does not read; give them in the object or with the flags", c.what(), strings.Join(missing, " and no "))
		return false
	}
	if len(bt.CACertHashes) == 0 && bt.UnsafeSkipCAVerification == nil {
		t := true
		bt.UnsafeSkipCAVerification = &t
		c.b.Warnf(p+".bootstrapToken", "no caCertHashes (--ca-cert-hash sha256:HEX): unsafeSkipCAVerification, as CABPK sets it when it has no CA hash, so the machine trusts whatever answers at %s", bt.APIServerEndpoint)
	}
	return true
}

// what names the object for messages: KubeadmConfigTemplate "md-0".
func (c *conv) what() string {
	return fmt.Sprintf("%s %q", c.b.Doc.Kind, c.src.name)
}
