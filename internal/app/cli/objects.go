package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/internal/lib/atomicfile"
	"github.com/vminit/vminit/internal/lib/inputfile"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/media"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/capi"
	"github.com/vminit/vminit/platform/convert"
	"github.com/vminit/vminit/platform/kube"
	"github.com/vminit/vminit/spec"
)

// objectFlags are the flags of commands that read, besides vminit specs,
// the objects of KubeVirt, Virtlet, oVirt and Cluster API.
type objectFlags struct {
	objects           []string
	kubeconfig        string
	kubeContext       string
	namespace         string
	passwordSalt      string
	kubernetesVersion string
	poolIndex         int
}

func (f *objectFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringArrayVar(&f.objects, "objects", nil, "a YAML file of Secrets and ConfigMaps that platform objects refer to (repeatable)")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "resolve references from the cluster of this kubeconfig (client-go; the same files are searched first)")
	fl.StringVar(&f.kubeContext, "context", "", "with --kubeconfig: the kubeconfig context to use")
	fl.StringVarP(&f.namespace, "namespace", "n", "", "namespace of platform objects that name none (default: the kubeconfig context's, else default)")
	fl.StringVar(&f.passwordSalt, "password-salt", "", "oVirt: hash root_password with SHA-512 crypt and this salt (1-16 of [./A-Za-z0-9]), reproducibly")
	fl.StringVar(&f.kubernetesVersion, "kubernetes-version", "", "Cluster API: the Kubernetes version the kubeadm configuration is for (default "+capi.DefaultKubernetesVersion+")")
	fl.IntVar(&f.poolIndex, "pool-index", 0, "KubeVirt VirtualMachinePool: which member to build")
}

// loaded is one instance read from the command line: a vminit spec, or a
// platform object converted to one.
type loaded struct {
	path   string
	inst   *spec.Instance   // nil for a Windows VM that only has a sysprep disc
	result *platform.Result // nil for a vminit spec
}

// load reads the files: each either a vminit spec, or documents holding
// platform objects and the Secrets and ConfigMaps they refer to. Warnings
// go to stderr.
func (f *objectFlags) load(ctx context.Context, paths []string, stderr io.Writer) ([]*loaded, error) {
	var out []*loaded
	var docs []*platform.Document
	docPath := map[*platform.Document]string{}
	for _, p := range paths {
		data, err := readInput(p)
		if err != nil {
			return nil, err
		}
		ds, err := platform.Split(p, data)
		if err != nil {
			return nil, err
		}
		if len(ds) == 1 && convert.IsInstance(ds[0]) {
			inst, err := spec.Load(p)
			if err != nil {
				return nil, err
			}
			out = append(out, &loaded{path: p, inst: inst})
			continue
		}
		for _, d := range ds {
			docPath[d] = p
		}
		docs = append(docs, ds...)
	}
	for _, p := range f.objects {
		data, err := readInput(p)
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
	if len(docs) == 0 {
		return out, nil
	}
	opts := platform.Options{Namespace: f.namespace, PasswordSalt: f.passwordSalt, KubernetesVersion: f.kubernetesVersion, PoolIndex: f.poolIndex}
	if f.kubeconfig != "" {
		cfg, ns, err := kube.Load(f.kubeconfig, f.kubeContext)
		if err != nil {
			return nil, usagef("--kubeconfig: %v", err)
		}
		r, err := kube.New(cfg)
		if err != nil {
			return nil, usagef("--kubeconfig: %v", err)
		}
		opts.Resolver = r
		if opts.Namespace == "" {
			opts.Namespace = ns
		}
	}
	results, err := convert.Documents(ctx, docs, opts)
	if err != nil {
		return nil, err
	}
	for _, r := range results {
		for _, w := range r.Warnings {
			fmt.Fprintf(stderr, "vminit: warning: %s\n", w)
		}
		out = append(out, &loaded{path: r.Object, inst: r.Instance, result: r})
	}
	return out, nil
}

// loadOne is load for commands that build one VM.
func (f *objectFlags) loadOne(ctx context.Context, paths []string, stderr io.Writer) (*loaded, error) {
	all, err := f.load(ctx, paths, stderr)
	if err != nil {
		return nil, err
	}
	switch len(all) {
	case 0:
		return nil, fmt.Errorf("%s: no vminit Instance and no VM among the objects (only Secrets and ConfigMaps?)", strings.Join(paths, ", "))
	case 1:
		return all[0], nil
	}
	names := make([]string, len(all))
	for i, l := range all {
		names[i] = l.path
	}
	return nil, usagef("%s: %d VMs (%s); this command builds one: give one per command", strings.Join(paths, ", "), len(all), strings.Join(names, "; "))
}

func readInput(p string) ([]byte, error) {
	if p == "-" {
		return io.ReadAll(io.LimitReader(os.Stdin, platform.MaxDocumentSize*4+1))
	}
	return inputfile.Read(p, platform.MaxDocumentSize*4)
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

// datasourceOf is --datasource, else the spec's, else nocloud.
func datasourceOf(flag string, inst *spec.Instance) string {
	if flag != "" {
		return flag
	}
	if inst != nil && inst.Spec.Datasource != "" {
		return inst.Spec.Datasource
	}
	return spec.DatasourceNoCloud
}

// writeSysprep writes a KubeVirt VM's sysprep disc to --sysprep-out, when
// the VM has one besides its cloud-init seed (alone, it is the output).
func writeSysprep(cmd *cobra.Command, l *loaded, path string, format media.Format, opts media.Options) error {
	if l.result == nil || l.result.Sysprep == nil || l.inst == nil {
		if path != "" {
			return usagef("--sysprep-out: %s has no sysprep volume besides its cloud-init data", l.path)
		}
		return nil
	}
	if path == "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "vminit: warning: %s also has a sysprep disc; pass --sysprep-out FILE to write it\n", l.path)
		return nil
	}
	if format == media.Dir {
		return atomicfile.WriteDir(path, func(dir string) error { return media.WriteDir(dir, l.result.Sysprep) })
	}
	return atomicfile.Write(path, 0o644, func(w io.Writer) error { return media.Write(w, l.result.Sysprep, format, opts) })
}

// isObjects reports whether the files hold platform objects (rather than
// cloud-config user data): their first document has an apiVersion, or is
// an oVirt representation.
func isObjects(paths []string) bool {
	if paths[0] == "-" {
		return false
	}
	data, err := readInput(paths[0])
	if err != nil {
		return false
	}
	docs, err := platform.Split(paths[0], data)
	if err != nil || len(docs) == 0 {
		return false
	}
	return convert.For(docs[0]) != nil || platform.IsReferenced(docs[0])
}

// convertObjects prints the vminit spec (or the Ignition config) of one
// platform VM.
func convertObjects(cmd *cobra.Command, f *objectFlags, paths []string, to, out string, iopts ignition.Options) error {
	l, err := f.loadOne(cmd.Context(), paths, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	if l.inst == nil {
		return fmt.Errorf("%s has only a sysprep answer-file disc, which no vminit spec carries", l.path)
	}
	result := l.result.Spec
	if to == "ignition" {
		if !cmd.Flags().Changed("variant") {
			iopts.Variant = ignition.Variant(l.inst.Spec.Ignition.Variant)
		}
		res, err := ignition.Render(l.inst, iopts)
		if err != nil {
			return err
		}
		for _, w := range res.Warnings {
			fmt.Fprintf(cmd.ErrOrStderr(), "vminit: warning: %s\n", w)
		}
		result = res.Config
	}
	if l.result.Sysprep != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "vminit: warning: %s also has a sysprep disc, which the spec does not carry (vminit build --sysprep-out writes it)\n", l.path)
	}
	if out == "" || out == "-" {
		_, err := cmd.OutOrStdout().Write(result)
		return err
	}
	return atomicfile.Write(out, 0o600, func(w io.Writer) error { _, err := w.Write(result); return err })
}

// putObjects stores the vminit spec of every VM in a file of platform
// objects.
func putObjects(cmd *cobra.Command, c *adminClient, f *objectFlags, path string) error {
	all, err := f.load(cmd.Context(), []string{path}, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	for _, l := range all {
		if l.inst == nil {
			return fmt.Errorf("%s: only a sysprep disc, which the metadata server does not serve", l.path)
		}
		data, err := c.do("PUT", "/v1/instances/"+url.PathEscape(l.inst.Metadata.Name), l.result.Spec, path)
		if err != nil {
			return err
		}
		var s mdserver.InstanceSummary
		json.Unmarshal(data, &s)
		fmt.Fprintf(cmd.OutOrStdout(), "%s: stored %s (revision %s)\n", l.path, s.Name, s.Revision)
	}
	return nil
}
