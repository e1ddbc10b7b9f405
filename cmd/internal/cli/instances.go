package cli

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/cmd/internal/cmdkit"
	"github.com/vminit/vminit/cmd/internal/serve"
	"github.com/vminit/vminit/internal/lib/secretfile"
	"github.com/vminit/vminit/internal/lib/tlsfiles"
	"github.com/vminit/vminit/mdserver/admin"
	"github.com/vminit/vminit/mdserver/kuberules"
	"github.com/vminit/vminit/mdserver/kubestore"
	"github.com/vminit/vminit/platform/cluster"
	"github.com/vminit/vminit/render"
)

// adminClient is the admin API client the --server, --token-file and TLS
// flags describe.
type adminClient struct {
	server, tokenFile string
	caFile            string
	certFile, keyFile string
	token             string
	http              *http.Client
	// api is the admin API of --server, or in process the operations on
	// a cluster's store (--kubeconfig).
	api admin.API
	// cluster holds --kubeconfig, --context and --namespace: without
	// --server, the instances are that cluster's Instance objects.
	cluster *inputFlags
	closer  io.Closer
	// namespace is the cluster's namespace: a store of a cluster names
	// its instances namespace/name, and a bare name means one there.
	namespace string
}

// instanceName is the name the store knows the instance arg by.
func (c *adminClient) instanceName(arg string) string {
	if c.namespace != "" && !strings.Contains(arg, "/") {
		return c.namespace + "/" + arg
	}
	return arg
}

func (c *adminClient) flags(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&c.server, "server", "", "admin API URL, e.g. https://mds.example:8443 (default $VMINIT_ADMIN_URL)")
	cmd.PersistentFlags().StringVar(&c.tokenFile, "token-file", "", "file holding the admin bearer token (without it: the token itself in $VMINIT_ADMIN_TOKEN)")
	cmd.PersistentFlags().StringVar(&c.caFile, "ca-file", "", "PEM CA bundle that signed the admin API's certificate (default: the system's)")
	cmd.PersistentFlags().StringVar(&c.certFile, "cert", "", "PEM client certificate, for an admin API that requires one (with --key)")
	cmd.PersistentFlags().StringVar(&c.keyFile, "key", "", "PEM private key of --cert")
}

func (c *adminClient) setup(ctx context.Context) error {
	if err := cmdkit.RegularFiles(map[string]string{"--token-file": c.tokenFile, "--ca-file": c.caFile, "--cert": c.certFile, "--key": c.keyFile}); err != nil {
		return err
	}
	if c.server == "" && c.cluster.kubeconfig != "" {
		return c.setupCluster(ctx)
	}
	if c.server == "" {
		c.server = os.Getenv("VMINIT_ADMIN_URL")
	}
	if c.server == "" {
		return usagef("no admin server: pass --server URL or set VMINIT_ADMIN_URL, or --kubeconfig FILE for a cluster's Instances")
	}
	u, err := url.Parse(c.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("--server=%q: want an http:// or https:// URL", c.server)
	}
	c.server = strings.TrimRight(c.server, "/")
	switch {
	case c.tokenFile != "":
		var err error
		if c.token, err = secretfile.Key(c.tokenFile, "admin token", 0); err != nil {
			return usagef("--token-file: %v", err)
		}
	default:
		c.token = strings.TrimSpace(os.Getenv("VMINIT_ADMIN_TOKEN"))
	}
	if c.token == "" {
		return usagef("no admin token: pass --token-file FILE or set VMINIT_ADMIN_TOKEN")
	}
	if (c.certFile == "") != (c.keyFile == "") {
		return usagef("--cert and --key go together")
	}
	if (c.caFile != "" || c.certFile != "") && u.Scheme != "https" {
		return usagef("--ca-file, --cert and --key are for an https:// --server")
	}
	if c.http == nil {
		tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.caFile != "" {
			var err error
			if tlsConfig.RootCAs, err = tlsfiles.LoadCertPool(c.caFile); err != nil {
				return usagef("--ca-file: %v", err)
			}
		}
		if c.certFile != "" {
			cert, err := tlsfiles.LoadKeyPair(c.certFile, c.keyFile)
			if err != nil {
				return usagef("--cert/--key: %v", err)
			}
			tlsConfig.Certificates = []tls.Certificate{cert}
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tlsConfig
		c.http = &http.Client{Timeout: 30 * time.Second, Transport: hintTransport{tr}}
	}
	c.api = &admin.Client{URL: c.server, Token: c.token, HTTP: c.http}
	return nil
}

// setupCluster makes the instances those of a cluster: a Kubernetes store
// (mdserver/kubestore) of the namespace, through the admin API's own
// operations (admin.Local) in process, so that every command means the
// same against a cluster as against a server.
func (c *adminClient) setupCluster(ctx context.Context) error {
	if c.tokenFile != "" || c.caFile != "" || c.certFile != "" {
		return usagef("--token-file, --ca-file, --cert and --key are for --server; --kubeconfig carries its own credentials")
	}
	cfg, ns, err := cluster.Load(c.cluster.kubeconfig, c.cluster.kubeContext)
	if err != nil {
		return usagef("--kubeconfig: %v", err)
	}
	if c.cluster.namespace != "" {
		ns = c.cluster.namespace
	}
	if ns == "" {
		ns = "default"
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	// Which addresses a spec may claim is the server's policy
	// (--spec-addresses), not this client's: it writes what it is given.
	anywhere := kuberules.AddressPolicy{SpecAddresses: map[string][]netip.Prefix{ns: {netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}}}
	store, err := kubestore.Open(octx, kubestore.Config{REST: cfg, Namespaces: []string{ns}, Logger: quiet, Addresses: anywhere})
	if err != nil {
		return err
	}
	c.closer, c.namespace = store, ns
	c.api = admin.NewLocal(store, admin.Options{Logger: quiet})
	return nil
}

func newInstancesCommand() *cobra.Command {
	var putIn inputFlags
	c := &adminClient{cluster: &putIn}
	cmd := &cobra.Command{
		Use:   "instances",
		Short: "Manage the instances a metadata server serves (admin API), or a cluster's Instance objects",
		Long: `Instances lists, shows, stores, deletes and previews the instances of a
running 'vminit serve' through its admin API, and shows (or waits for)
their first boots. The server URL comes from
--server or $VMINIT_ADMIN_URL, the bearer token from --token-file or
$VMINIT_ADMIN_TOKEN.

With --kubeconfig (and no --server) the instances are the Instance objects
(vminit.dev/v1alpha1) of a Kubernetes cluster, in --namespace (default: the
kubeconfig context's, else default): put creates or updates them, delete
removes them, and list, get and preview read them, with the same checks and
output as against a server.`,
		Example: `  export VMINIT_ADMIN_URL=https://mds.example:8443 VMINIT_ADMIN_TOKEN=$(cat token)
  vminit instances put web-1.yaml web-2.yaml
  vminit instances list
  vminit instances preview web-1 --dialect ignition
  vminit instances status --wait --timeout 15m
  vminit instances put web-1.yaml --kubeconfig ~/.kube/config -n vms`,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return c.setup(cmd.Context()) },
		PersistentPostRunE: func(*cobra.Command, []string) error {
			if c.closer != nil {
				return c.closer.Close()
			}
			return nil
		},
	}
	c.flags(cmd)
	putIn.registerCluster(cmd.PersistentFlags(), "a cluster's Instance objects are the instances (without --server); put also resolves platform objects' references there",
		"with --kubeconfig: the namespace of the Instances, of platform objects and of the Secrets they read (default: the kubeconfig context's, else default); an object in another is an error")
	cmd.AddCommand(c.listCommand(), c.getCommand(), c.putCommand(&putIn), c.deleteCommand(), c.previewCommand(), c.statusCommand())
	return cmd
}

func (c *adminClient) listCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List instance names and addresses",
		Example: "  vminit instances list --server https://mds.example:8443 --ca-file ca.pem",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := c.api.List(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tADDRESSES\tREVISION")
			for _, i := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", i.Name, strings.Join(i.Addresses, ","), i.Revision)
			}
			return tw.Flush()
		},
	}
}

func (c *adminClient) getCommand() *cobra.Command {
	return &cobra.Command{
		Use:               "get NAME",
		Short:             "Print an instance's stored spec (YAML, defaults filled in)",
		Example:           "  vminit instances get web-1 > web-1.yaml",
		Args:              exactArgs(1, "one NAME"),
		ValidArgsFunction: c.completeNames(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := c.api.Get(cmd.Context(), c.instanceName(args[0]))
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(data)
			return err
		},
	}
}

// putCommand is `instances put`; putIn are the input flags it shares with
// the parent command (--kubeconfig and --namespace are persistent there).
func (c *adminClient) putCommand(putIn *inputFlags) *cobra.Command {
	put := &cobra.Command{
		Use:   "put SPEC...",
		Short: "Validate spec files locally and store them on the server",
		Long: `Put checks each spec file as 'vminit validate' does (every problem listed
with its line), inlines files[].source.file content (the server never reads
its own files for a stored spec), and stores it. A spec the server refuses
(an address another instance holds, for example) fails with exit code 1;
the specs before it stay stored. A spec stored without an address (no
spec.metadataServer.addresses; in a cluster, no VM naming it yet) is
warned about: no guest can fetch it until one identifies it.`,
		Example: `  vminit instances put web-1.yaml web-2.yaml
  vminit instances put --source-root /srv/vminit web-1.yaml`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("want at least one SPEC file")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, path := range args {
				all, err := putIn.load(cmd, []string{path})
				if err != nil {
					return err
				}
				for _, si := range all {
					name, doc, err := inlineSpec(cmd, si)
					if err != nil {
						return err
					}
					s, err := c.api.Put(cmd.Context(), name, doc)
					if err != nil {
						withFile(err, path)
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s: stored %s (revision %s)\n", si.name, s.Name, s.Revision)
					if len(s.Addresses) == 0 {
						// Stored, but no guest's request will find it: it would
						// stay pending for ever.
						fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s: no guest can fetch %s yet, no address identifies it: %s\n",
							si.name, s.Name, serve.UnaddressedHint(c.namespace != ""))
					}
				}
			}
			return nil
		},
	}
	putIn.registerFiles(put)
	return put
}

func (c *adminClient) deleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:               "delete NAME",
		Short:             "Remove an instance",
		Example:           "  vminit instances delete web-1",
		Args:              exactArgs(1, "one NAME"),
		ValidArgsFunction: c.completeNames(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := c.api.Delete(cmd.Context(), c.instanceName(args[0])); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", args[0])
			return nil
		},
	}
}

func (c *adminClient) previewCommand() *cobra.Command {
	var (
		dialect string
		report  reportFlags
	)
	preview := &cobra.Command{
		Use:   "preview NAME",
		Short: "Show what the instance's VM would get (" + orList(admin.PreviewDialects) + ")",
		Example: `  vminit instances preview web-1
  vminit instances preview web-1 --dialect ec2 --json`,
		Args:              exactArgs(1, "one NAME"),
		ValidArgsFunction: c.completeNames(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := report.json()
			if err != nil {
				return err
			}
			p, err := c.api.Preview(cmd.Context(), c.instanceName(args[0]), dialect)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(p)
			}
			printPreview(cmd.OutOrStdout(), p)
			for _, wn := range p.Warnings {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", wn)
			}
			return nil
		},
	}
	preview.Flags().StringVar(&dialect, "dialect", admin.PreviewDialects[0], orList(admin.PreviewDialects)+" (those after ignition: every path the guest would fetch)")
	report.register(preview)
	return preview
}

// printPreview writes a preview's files as text, each under a ==> path <==
// header as tail(1) does; binary files as base64.
func printPreview(w io.Writer, p *admin.Preview) {
	for _, f := range p.Files {
		fmt.Fprintf(w, "==> %s <==\n", f.Path)
		if f.ContentBase64 != "" {
			fmt.Fprintf(w, "(binary, base64)\n%s\n", f.ContentBase64)
		} else {
			io.WriteString(w, f.Content)
			if !strings.HasSuffix(f.Content, "\n") {
				fmt.Fprintln(w)
			}
		}
	}
}

// inlineSpec runs validate's checks on a loaded spec (or converted platform
// object) and returns its name and the document to send: the file itself,
// the converted spec, or, when a spec has references, the loaded spec
// re-encoded as spec.Instance.ForAPI makes it (files' content inlined,
// Secret and ConfigMap references kept for the server).
func inlineSpec(cmd *cobra.Command, si *specInput) (string, []byte, error) {
	if si.inst == nil {
		return "", nil, fmt.Errorf("%s: only a sysprep disc, which the metadata server does not serve", si.name)
	}
	rep := render.Instance(si.inst, render.Target{})
	printWarnings(cmd, si, rep.Warnings)
	if !rep.OK() {
		return "", nil, si.locate(rep.Errors)
	}
	inst, raw := si.inst, si.data
	if si.result != nil {
		return inst.Metadata.Name, si.result.Spec, nil
	}
	inst, inlined := inst.ForAPI()
	if !inlined {
		return inst.Metadata.Name, raw, nil
	}
	doc, err := yaml.Marshal(inst)
	if err != nil {
		return "", nil, errors.Join(fmt.Errorf("%s: re-encoding with source files inlined", si.name), err)
	}
	return inst.Metadata.Name, doc, nil
}

// completeNames offers the names of the instances the flags given so far
// name (--server and its token, or --kubeconfig), up to max of them per
// word (max 0: any number); nothing when they reach none. A shell's
// completion must not hang: the server has 5 s.
func (c *adminClient) completeNames(max int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if max > 0 && len(args) >= max {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
		defer cancel()
		if err := c.setup(ctx); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		if c.closer != nil {
			defer c.closer.Close()
		}
		list, err := c.api.List(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, i := range list {
			name := strings.TrimPrefix(i.Name, c.namespace+"/")
			if strings.HasPrefix(name, prefix) && !slices.Contains(args, name) {
				out = append(out, name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
