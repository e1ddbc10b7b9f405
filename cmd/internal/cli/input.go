package cli

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vminit/vminit/internal/lib/inputfile"
	"github.com/vminit/vminit/internal/lib/lazyre"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/capi"
	"github.com/vminit/vminit/platform/cluster"
	"github.com/vminit/vminit/platform/convert"
	"github.com/vminit/vminit/platform/refs"
	"github.com/vminit/vminit/spec"
)

// stdinName is how problems in input read from standard input name it.
const stdinName = "<stdin>"

// maxInput bounds one input file: a spec, or a file of platform objects
// (a VM with the Secrets it refers to).
const maxInput = platform.MaxDocumentSize * 4

// inputFlags are the flags of every command that reads specs, or the
// objects of KubeVirt, Virtlet, oVirt and Cluster API.
type inputFlags struct {
	sourceRoot        string
	objects           []string
	kubeconfig        string
	kubeContext       string
	namespace         string
	passwordSalt      string
	kubernetesVersion string
	poolIndex         int
	name              string
	object            string
	// Cluster API: the machine built and its join discovery.
	machine              string
	bootstrapToken       string
	controlPlaneEndpoint string
	caCertHashes         []string
	// controlPlane is --control-plane: an empty KubeadmConfig's role.
	controlPlane bool
	// controlPlaneInitialized is --control-plane-initialized: whether a
	// control-plane machine's cluster is initialized.
	controlPlaneInitialized bool
	// identifiedByPlatform is validate's --kubernetes: the spec is read
	// as an Instance object a cluster serves (spec.Loader's
	// IdentifiedByPlatform).
	identifiedByPlatform bool
}

func (f *inputFlags) register(cmd *cobra.Command) {
	f.registerCluster(cmd.Flags(), "resolve platform objects' references from the cluster of this kubeconfig (the files given are searched first)",
		"the namespace of platform objects and of the Secrets they read, an object in another being an error (default with --kubeconfig: its context's; without either, each object's own)")
	f.registerFiles(cmd)
}

// registerCluster registers --kubeconfig, --context and --namespace, which
// `vminit instances` shares between its commands.
func (f *inputFlags) registerCluster(fl *pflag.FlagSet, kubeconfigHelp, namespaceHelp string) {
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", kubeconfigHelp)
	fl.StringVar(&f.kubeContext, "context", "", "with --kubeconfig: the kubeconfig context to use")
	fl.StringVarP(&f.namespace, "namespace", "n", "", namespaceHelp)
}

// registerFiles registers the other input flags.
func (f *inputFlags) registerFiles(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.sourceRoot, "source-root", "", "directory files[].source.file may read from (default: the spec's own directory, or the current one for -)")
	fl.StringArrayVar(&f.objects, "objects", nil, "a YAML file of Secrets and ConfigMaps that platform objects refer to (repeatable)")
	fl.StringVar(&f.passwordSalt, "password-salt", "", "oVirt: hash root_password with SHA-512 crypt and this salt (1-16 of [./A-Za-z0-9]), reproducibly")
	fl.StringVar(&f.kubernetesVersion, "kubernetes-version", "", "Cluster API: the Kubernetes version the kubeadm configuration is for (default "+capi.DefaultKubernetesVersion+")")
	fl.IntVar(&f.poolIndex, "pool-index", 0, "KubeVirt VirtualMachinePool: which member to build; a StatefulSet of Virtlet pods: which ordinal; a Cluster API KubeadmControlPlane: which machine (0 inits the cluster, the others join it)")
	fl.StringVar(&f.machine, "machine", "", "Cluster API: the name of the machine to build (its host name and instance id); a template's machines each need their own")
	fl.StringVar(&f.bootstrapToken, "bootstrap-token", "", "Cluster API: the kubeadm bootstrap token a joining machine uses when its object has none (CABPK creates one)")
	fl.StringVar(&f.controlPlaneEndpoint, "control-plane-endpoint", "", "Cluster API: HOST:PORT of the cluster's API server a joining machine discovers it at, when its object has none (CABPK takes the Cluster's)")
	fl.BoolVar(&f.controlPlane, "control-plane", false, "Cluster API: a KubeadmConfig's machine is a control-plane machine (kubeadm init, or a control-plane join: --control-plane-initialized); =false: a worker (kubeadm join); where no Machine in the input (or the cluster of --kubeconfig) says")
	fl.BoolVar(&f.controlPlaneInitialized, "control-plane-initialized", false, "Cluster API: the cluster of a KubeadmConfig's control-plane machine has its control plane initialized (the machine joins it, as CABPK joins it); =false: not (the machine inits the cluster); where no Cluster in the input (or the cluster of --kubeconfig) says")
	fl.StringArrayVar(&f.caCertHashes, "ca-cert-hash", nil, "Cluster API: sha256:HEX of the cluster CA's public key, for a joining machine whose object has none (repeatable; CABPK takes the Cluster's CA)")
	fl.StringVar(&f.name, "name", "", "the instance name when the input gives none (an oVirt start action, whose VM is named in the URL; a cloud-config without hostname)")
	fl.StringVar(&f.object, "object", "", "the object to use when the files hold several VMs: NAME or KIND/NAME (validate without it checks every one)")
}

// specInput is one instance read from the command line: a vminit spec, or
// a platform object converted to one.
type specInput struct {
	// inst is nil for a Windows VM that has only a sysprep disc.
	inst *spec.Instance
	// name is the spec's file name (stdinName for -), or the platform
	// object ("KubeVirt VirtualMachine default/vm").
	name string
	// data is the spec's text, for the lines of problems found after
	// loading; nil for a platform object, whose problems past the
	// conversion are the converted spec's.
	data []byte
	// result is the platform object's conversion, or nil.
	result *platform.Result
}

// loadSome reads the inputs, of which there must be one at least.
func (f *inputFlags) loadSome(cmd *cobra.Command, paths []string) ([]*specInput, error) {
	all, err := f.load(cmd, paths)
	if err == nil && len(all) == 0 {
		err = fmt.Errorf("%s: no vminit Instance and no VM among the objects (only Secrets and ConfigMaps?)", strings.Join(paths, ", "))
	}
	return all, err
}

// loadOne reads the inputs of a command that makes one VM's data.
func (f *inputFlags) loadOne(cmd *cobra.Command, paths []string) (*specInput, error) {
	all, err := f.loadSome(cmd, paths)
	if err != nil {
		return nil, err
	}
	if len(all) == 1 {
		return all[0], nil
	}
	names := make([]string, len(all))
	for i, in := range all {
		names[i] = in.name
		if r := in.result; r != nil && r.Key != "" {
			// What --object takes, and where the object is.
			names[i] = r.Key + " at " + r.Where
		}
	}
	return nil, usagef("%s: %d VMs (%s); this command makes one: pick it with --object NAME or KIND/NAME", strings.Join(paths, ", "), len(all), strings.Join(names, "; "))
}

// load reads the inputs: each a vminit spec ("-": standard input, whose
// source files are relative to the current directory), or documents
// holding platform objects and the Secrets and ConfigMaps they refer to.
// A spec is decoded, defaulted and validated; platform objects are
// converted. Conversion warnings go to standard error.
func (f *inputFlags) load(cmd *cobra.Command, paths []string) ([]*specInput, error) {
	var out []*specInput
	var docs []*platform.Document
	for _, p := range paths {
		data, err := f.read(cmd, p)
		if err != nil {
			return nil, err
		}
		name := p
		if p == "-" {
			name = stdinName
		}
		if !looksLikeSpec(data) {
			// Spared for a plain spec: platform.Split's generic parse
			// costs a large spec several times its own decoding.
			ds, err := platform.Split(name, data)
			if err != nil {
				return nil, err
			}
			if !convert.IsSpecFile(ds) {
				docs = append(docs, ds...)
				continue
			}
		}
		// A vminit spec: spec.Parse says what is wrong with it.
		in, err := f.loadSpec(cmd, p, name, data)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	refs, err := f.loadObjectFiles(cmd)
	if err != nil {
		return nil, err
	}
	docs = append(docs, refs...)
	if len(docs) == 0 {
		if f.object != "" {
			return nil, usagef("--object %s: the files hold no platform objects", f.object)
		}
		return out, unconcerned(cmd, out)
	}
	opts := platform.Options{Namespace: f.namespace, PasswordSalt: f.passwordSalt, KubernetesVersion: f.kubernetesVersion, PoolIndex: f.poolIndex, Name: f.name, Object: f.object,
		Machine: f.machine, BootstrapToken: f.bootstrapToken, ControlPlaneEndpoint: f.controlPlaneEndpoint, CACertHashes: f.caCertHashes,
		// A namespace chosen (-n, or the cluster's) is the only one read
		// from: an object may not point the command at another's Secrets.
		Confined: f.namespace != "" || f.kubeconfig != ""}
	if cmd.Flags().Changed("control-plane") {
		opts.ControlPlane = &f.controlPlane
	}
	if cmd.Flags().Changed("control-plane-initialized") {
		opts.ControlPlaneInitialized = &f.controlPlaneInitialized
	}
	if f.kubeconfig != "" {
		r, ns, err := f.cluster()
		if err != nil {
			return nil, err
		}
		opts.Resolver, opts.FindMachine, opts.FindCluster = r, r.FindMachine, r.FindCluster
		if opts.Namespace == "" {
			opts.Namespace = ns
		}
	}
	results, err := convert.Documents(cmd.Context(), docs, opts)
	if err != nil {
		return nil, err
	}
	for _, r := range results {
		out = append(out, &specInput{inst: r.Instance, name: r.Object, result: r})
	}
	if err := unconcerned(cmd, out); err != nil {
		return nil, err
	}
	printConversionWarnings(cmd, results)
	return out, nil
}

// printConversionWarnings prints the conversions' warnings, each once:
// each VM of a file carries the notes of the documents skipped beside it.
func printConversionWarnings(cmd *cobra.Command, results []*platform.Result) {
	warned := map[string]bool{}
	for _, r := range results {
		for _, w := range r.Warnings {
			if !warned[w] {
				warned[w] = true
				fmt.Fprintf(cmd.ErrOrStderr(), "vminit: warning: %s\n", w)
			}
		}
	}
}

// scopedGiven returns the flags given whose options concern some objects
// only (platform.Scopes).
func scopedGiven(cmd *cobra.Command) []string {
	var given []string
	for _, s := range platform.Scopes {
		if fl := cmd.Flags().Lookup(strings.TrimPrefix(s.Flag, "--")); fl != nil && fl.Changed {
			given = append(given, s.Flag)
		}
	}
	return given
}

// unconcerned refuses the flags given whose options concern none of the
// inputs read (platform.Scopes): the user expects them to act.
func unconcerned(cmd *cobra.Command, in []*specInput) error {
	given := scopedGiven(cmd)
	if len(given) == 0 {
		return nil
	}
	var results []*platform.Result
	var specs []string
	for _, i := range in {
		if i.result != nil {
			results = append(results, i.result)
		} else {
			specs = append(specs, i.name+" (a vminit spec)")
		}
	}
	if problems := platform.Unconcerned(given, results, specs); len(problems) > 0 {
		return usagef("%s", strings.Join(problems, "\n"))
	}
	return nil
}

// loadObjectFiles reads the --objects files, which may hold only what
// platform objects refer to (Secrets and ConfigMaps).
func (f *inputFlags) loadObjectFiles(cmd *cobra.Command) ([]*platform.Document, error) {
	var docs []*platform.Document
	for _, p := range f.objects {
		data, err := f.read(cmd, p)
		if err != nil {
			return nil, fmt.Errorf("--objects: %w", err)
		}
		ds, err := platform.Split(p, data)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			if !platform.IsReferenced(d) {
				return nil, spec.Errors{d.Error("kind", fmt.Sprintf("%q: --objects files hold Secrets and ConfigMaps", d.Kind))}
			}
		}
		docs = append(docs, ds...)
	}
	return docs, nil
}

// specHead matches the apiVersion line of a vminit spec, and docBreak a
// YAML document separator.
var (
	specHead = lazyre.New(`(?m)^apiVersion:[ \t]*["']?vminit\.dev/`)
	docBreak = lazyre.New(`(?m)^(---|\.\.\.)([ \t]|$)`)
)

// looksLikeSpec reports whether data is plainly one vminit spec document:
// its apiVersion says so at the top level and it holds no other document.
func looksLikeSpec(data []byte) bool {
	return specHead.Match(data) && !docBreak.Match(data)
}

// read reads one input file ("-": standard input).
func (f *inputFlags) read(cmd *cobra.Command, p string) ([]byte, error) {
	if p != "-" {
		return inputfile.Read(p, maxInput)
	}
	data, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxInput+1))
	if err == nil && len(data) > maxInput {
		err = fmt.Errorf("%s: more than %d bytes", stdinName, maxInput)
	}
	return data, err
}

// cluster is the Secret and ConfigMap reader of --kubeconfig, and its
// context's namespace.
func (f *inputFlags) cluster() (*cluster.Resolver, string, error) {
	cfg, ns, err := cluster.Load(f.kubeconfig, f.kubeContext)
	if err != nil {
		return nil, "", usagef("--kubeconfig: %v", err)
	}
	r, err := cluster.New(cfg)
	if err != nil {
		return nil, "", usagef("--kubeconfig: %v", err)
	}
	return r, ns, nil
}

// specRefs is where a vminit spec's secretKeyRef and configMapKeyRef are
// read from on the command line: the Secrets and ConfigMaps of the
// --objects files, then the cluster of --kubeconfig, in one namespace
// (--namespace, else the kubeconfig context's, else "default"), as the
// controller reads an Instance's own.
func (f *inputFlags) specRefs(cmd *cobra.Command) (spec.Refs, error) {
	ns := f.namespace
	var chain platform.Chain
	docs, err := f.loadObjectFiles(cmd)
	if err != nil {
		return nil, err
	}
	if f.kubeconfig != "" {
		r, contextNS, err := f.cluster()
		if err != nil {
			return nil, err
		}
		ns = cmp.Or(ns, contextNS)
		chain = append(chain, r)
	}
	ns = cmp.Or(ns, platform.DefaultNamespace)
	local := &refs.Objects{Namespace: ns}
	for _, d := range docs {
		if err := local.Add(d); err != nil {
			return nil, err
		}
	}
	return platform.SpecRefs(cmd.Context(), append(platform.Chain{local}, chain...), ns), nil
}

// lazyRefs is a spec.Refs made at its first use: a spec that refers to no
// Secret or ConfigMap makes the command read no --objects file and no
// cluster.
type lazyRefs struct {
	build func() (spec.Refs, error)
	refs  spec.Refs
	err   error
	done  bool
}

func (l *lazyRefs) Key(kind, name, key string) ([]byte, error) {
	if !l.done {
		l.refs, l.err = l.build()
		l.done = true
	}
	if l.err != nil {
		return nil, l.err
	}
	return l.refs.Key(kind, name, key)
}

// loadSpec parses a vminit spec read from path. Without --kubeconfig or
// --objects its Secret and ConfigMap references are refused, the loader
// saying what to pass.
func (f *inputFlags) loadSpec(cmd *cobra.Command, path, name string, data []byte) (*specInput, error) {
	l := spec.Loader{SourceRoot: f.sourceRoot, IdentifiedByPlatform: f.identifiedByPlatform}
	if f.kubeconfig != "" || len(f.objects) > 0 {
		l.Refs = &lazyRefs{build: func() (spec.Refs, error) { return f.specRefs(cmd) }}
	}
	dir := "."
	if path != "-" {
		dir = filepath.Dir(path)
	}
	inst, err := l.Parse(data, dir)
	for _, e := range spec.AsErrors(err) {
		e.File = name
	}
	if err != nil {
		return nil, err
	}
	return &specInput{inst: inst, name: name, data: data}, nil
}

// locate gives problems found after loading (by a renderer or a check)
// the input's name and, for a spec whose field has one, its line; for a
// platform object, the object's field they came from, its line and the
// object (platform.Result.Locate).
func (in *specInput) locate(es spec.Errors) spec.Errors {
	// A platform object's instance: the object's field, line and name.
	es = in.result.Locate(es)
	var pos *spec.Positions
	for _, e := range es {
		if e.File != "" {
			continue // a platform object's problem names its own place
		}
		e.File = in.name
		if e.Line == 0 && e.Field != "" && in.data != nil {
			if pos == nil {
				_, pos, _ = spec.Decode(in.data)
			}
			if pos != nil {
				e.Line = pos.Line(e.Field)
			}
		}
	}
	return es
}

// withFile names path as the file of every field error in err.
func withFile(err error, path string) {
	for _, e := range spec.AsErrors(err) {
		e.File = path
	}
}

// minArgs is cobra.MinimumNArgs with the usage exit code.
func minArgs(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < n {
			return usagef("want %s", what)
		}
		return nil
	}
}
