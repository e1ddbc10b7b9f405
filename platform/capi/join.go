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
//   - a KubeadmConfig is one machine's: it inits when it has an init or
//     cluster configuration (the first control-plane machine's form),
//     else it joins; an empty one (machineRole) is what its Machine
//     makes of it, and one joining the control plane is refused for a
//     worker's Machine, as CABPK refuses it (checkControlPlaneJoin).
func (c *conv) initializes() bool {
	cs := c.cs
	hasInit := !isZero(cs.InitConfiguration) || !isZero(cs.ClusterConfiguration)
	if c.src.role == roleMachine && !hasInit {
		if isZero(cs.JoinConfiguration) {
			return c.machineRole()
		}
		if cs.JoinConfiguration.ControlPlane != nil {
			c.checkControlPlaneJoin()
			return false
		}
	}
	switch c.src.role {
	case roleWorkers:
		if hasInit {
			c.b.Warnf(c.initPath(), "ignored: the machines of a KubeadmConfigTemplate (a MachineDeployment's or MachinePool's) always join, as CABPK joins every machine that is not a control-plane machine")
		}
		return false
	case roleControlPlane:
		return c.controlPlaneMachine()
	}
	if hasInit && !isZero(cs.JoinConfiguration) {
		c.b.Warnf(c.path+".joinConfiguration", "not used: the object also has an init configuration, which the first control-plane machine uses (the others join with this one)")
	}
	return hasInit
}

// machineRole decides what an empty KubeadmConfig (no init, cluster or
// join configuration: the Cluster API book's first control plane and its
// worker) does, as CABPK decides it from the Machine that names it: a
// control-plane Machine (label cluster.x-k8s.io/control-plane) inits the
// cluster with CABPK's defaults when it is the first (a later one has
// joinConfiguration.controlPlane, as the book's second), any other joins
// as a worker. Without a role (role) it would be a guess, and a wrong one
// makes a control-plane machine a worker without a word (issue 33 item
// 4): an error naming both ways to say it.
func (c *conv) machineRole() bool {
	cp, known := c.role()
	if c.noRole || known {
		return cp
	}
	c.noRole = true
	c.b.Errorf("metadata.name", "%s is empty (no init, cluster or join configuration): CABPK makes of it what its Machine is, kubeadm init with its defaults for the cluster's first control-plane Machine (label %s), kubeadm join for a worker, and the object alone does not say which; give its Machine (spec.bootstrap.configRef naming it) in the same input or read it from the cluster with --kubeconfig, or say it with --control-plane (the first control-plane machine) or --control-plane=false (a worker)", c.what(), platform.LabelControlPlane)
	return false
}

// role is the role of a KubeadmConfig's machine as its Machine says (one
// in the input, Options.Machines, else the cluster's, Options.FindMachine),
// else --control-plane (Options.ControlPlane); known is false when none
// says. When the flag contradicts the Machine, or the cluster could not be
// asked and no flag says, an error is added and noRole set; the flag
// decides, with a warning, when the cluster could not be asked (one that
// serves no Machines cannot say).
func (c *conv) role() (controlPlane, known bool) {
	m, err := c.ownMachine()
	flag := c.opts.ControlPlane
	switch {
	case err != nil && flag != nil:
		c.machineErrSaid = true
		c.b.Warnf("metadata.name", "%v: --control-plane=%t decides", err, *flag)
		return *flag, true
	case err != nil:
		c.machineErrSaid = true
		c.b.Errorf("metadata.name", "%v", err)
		c.noRole = true
		return false, false
	case m != nil && flag != nil && *flag != m.ControlPlane:
		c.b.Errorf("metadata.name", "--control-plane=%t, but its Machine %s (%s) %s: give one", *flag, m.Name, m.Where, roleOf(m.ControlPlane))
		c.noRole = true
		return false, false
	case m != nil:
		return m.ControlPlane, true
	case flag != nil:
		return *flag, true
	}
	return false, false
}

// checkControlPlaneJoin refuses a KubeadmConfig that joins the control
// plane (joinConfiguration.controlPlane, no init configuration) for a
// machine whose Machine is no control-plane machine (or that
// --control-plane=false says is a worker), as CABPK refuses it: its
// joinWorker returns "Machine is a Worker, but JoinConfiguration.ControlPlane
// is set in the KubeadmConfig object" and the machine gets no bootstrap
// data (bootstrap/kubeadm/reconcilers/kubeadmconfig/kubeadmconfig_controller.go
// line 721 at cluster-api v1.14.0). vminit built a control-plane join for
// it, which kubeadm runs on a machine Cluster API counts as a worker. A
// cluster that cannot say leaves the object's word (with a warning).
func (c *conv) checkControlPlaneJoin() {
	if _, err := c.ownMachine(); err != nil && c.opts.ControlPlane == nil {
		return // the object's own word stands; unreadMachine warns
	}
	cp, known := c.role()
	if c.noRole || !known || cp {
		return
	}
	who := "--control-plane=false says its machine is a worker"
	if m := c.machine; m != nil {
		who = fmt.Sprintf("its Machine %s (%s) %s", m.Name, m.Where, roleOf(false))
	}
	c.noRole = true
	c.b.Errorf(c.path+".joinConfiguration.controlPlane", "%s joins the control plane, but %s: CABPK gives such a machine no bootstrap data (its joinWorker: \"Machine is a Worker, but JoinConfiguration.ControlPlane is set in the KubeadmConfig object\"); label the Machine %s for a control-plane machine, or drop joinConfiguration.controlPlane for a worker", c.what(), who, platform.LabelControlPlane)
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
	c.cs.InitConfiguration = bootstrapv1.InitConfiguration{}
	if c.cs.JoinConfiguration.ControlPlane == nil {
		c.cs.JoinConfiguration.ControlPlane = &bootstrapv1.JoinControlPlane{}
	}
	if !slices.ContainsFunc(c.cs.Files, func(f bootstrapv1.File) bool { return f.Path == "/etc/kubernetes/pki/ca.key" }) {
		c.b.Warnf(c.path+".files", "a joining control-plane machine needs the cluster's certificate authorities (/etc/kubernetes/pki/ca.crt and ca.key, sa.key and sa.pub, front-proxy-ca, etcd/ca): CABPK writes them into its data from the Cluster's Secrets, which vminit does not read; give them as files, or kubeadm join --control-plane fails")
	}
	return false
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
