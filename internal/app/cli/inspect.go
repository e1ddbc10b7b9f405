package cli

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/media"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// inspectReport is what inspect prints, as text or JSON.
type inspectReport struct {
	Image      string             `json:"image"`
	Size       int64              `json:"size"`
	Filesystem media.Format       `json:"filesystem"`
	Label      string             `json:"label"`
	Labels     map[string]string  `json:"labels"`
	Datasource string             `json:"datasource,omitempty"`
	Files      []inspectFile      `json:"files"`
	Problems   []*spec.FieldError `json:"problems"`
}

type inspectFile struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	Mode string `json:"mode"`
}

func newInspectCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "inspect IMAGE",
		Short: "Show a seed image's label, filesystem and files, and re-validate its contents",
		Long: `Inspect reads an ISO9660 or VFAT seed image (ours or anyone's), prints its
label, filesystem and files, and checks its contents the way cloud-init will
read them: the label, the required files, meta-data, user-data and network
configuration. It exits 1 when it finds a problem.`,
		Example: `  vminit inspect seed.iso
  vminit inspect seed.img --output json`,
		Args: exactArgs(1, "one IMAGE file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return usagef("--output=%q: want text or json", output)
			}
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				return err
			}
			img, err := media.Open(f, st.Size())
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			rep := inspectReport{Image: args[0], Size: st.Size(), Filesystem: img.Format, Label: img.Label,
				Labels: img.Labels, Problems: []*spec.FieldError{}}
			err = fs.WalkDir(img.FS, ".", func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if d.IsDir() {
					return nil
				}
				info, err := d.Info()
				if err != nil {
					return err
				}
				rep.Files = append(rep.Files, inspectFile{Path: p, Size: info.Size(), Mode: info.Mode().String()})
				return nil
			})
			if err != nil {
				return fmt.Errorf("%s: reading the file tree: %w", args[0], err)
			}
			s, err := seed.Read(img.FS, img.Label)
			if err == nil {
				rep.Datasource = string(s.Datasource)
				err = seed.Check(s)
			}
			if es := spec.AsErrors(err); es != nil {
				rep.Problems = es
			} else if err != nil {
				rep.Problems = spec.Errors{{Message: err.Error()}}
			}
			sort.SliceStable(rep.Problems, func(i, j int) bool { return rep.Problems[i].Field < rep.Problems[j].Field })
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else {
				printInspect(cmd, &rep)
			}
			if len(rep.Problems) > 0 {
				return alreadyReported{fmt.Errorf("%d problems", len(rep.Problems))}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "report format: text or json")
	cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func printInspect(cmd *cobra.Command, r *inspectReport) {
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "image:\t%s (%d bytes)\n", r.Image, r.Size)
	fmt.Fprintf(w, "filesystem:\t%s\n", r.Filesystem)
	fmt.Fprintf(w, "label:\t%s\n", r.Label)
	keys := make([]string, 0, len(r.Labels))
	for k := range r.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %s:\t%s\n", k, r.Labels[k])
	}
	if r.Datasource != "" {
		fmt.Fprintf(w, "datasource:\t%s\n", r.Datasource)
	}
	fmt.Fprintf(w, "files:\n")
	for _, f := range r.Files {
		fmt.Fprintf(w, "  %s\t%s\t%d\n", f.Path, f.Mode, f.Size)
	}
	if len(r.Problems) == 0 {
		fmt.Fprintf(w, "checks:\tok\n")
	} else {
		fmt.Fprintf(w, "problems:\n")
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  %v\n", p)
		}
	}
	w.Flush()
}
