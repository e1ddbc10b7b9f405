package cli

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/internal/lib/inputfile"
	"github.com/vminit/vminit/media"
	"github.com/vminit/vminit/platform/kubevirt"
	"github.com/vminit/vminit/platform/ovirt"
	"github.com/vminit/vminit/platform/sysprep"
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
	Notes      []string           `json:"notes"`
	Problems   []*spec.FieldError `json:"problems"`
	// Warnings are what cloud-init delivers but ignores or reads oddly:
	// what `vminit build` writes with the same warning (--strict in both
	// makes them problems).
	Warnings []*spec.FieldError `json:"warnings"`
}

type inspectFile struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	Mode string `json:"mode"`
}

// alignment is the size QEMU wants raw images to be a multiple of on
// storage with 4 KiB sectors.
const alignment = 4096

func newInspectCommand() *cobra.Command {
	var report reportFlags
	var strict bool
	cmd := &cobra.Command{
		Use:   "inspect IMAGE",
		Short: "Show a seed's label, filesystem and files, and re-check its contents",
		Long: `Inspect reads a seed, an ISO9660 or VFAT image (ours or anyone's) or a tar
archive that build wrote, prints its label, filesystem and files, and checks
its contents the way cloud-init will read them: the label, the required
files, meta-data, user-data (and the SSH keys inside it, as build judges
them) and network configuration (as cloud-init 22.4 reads it: an entry it
drops, or none of its interfaces, is a problem). A Windows sysprep disc
as build writes it, KubeVirt's (label unattendCD: autounattend.xml or
unattend.xml) or oVirt's (no label: Unattend.xml or sysprep.inf), is
checked for a well-formed answer file instead, and its passes and
components noted as build warned of them. It notes what a
hypervisor may refuse (an image whose size is not a multiple of 4 KiB) and
exits 1 when it finds a problem. What cloud-init delivers but ignores (user
data of no type it knows) is a warning, as 'vminit build' warns of it when it
writes such a seed; --strict makes warnings problems.`,
		Example: `  vminit inspect seed.iso
  vminit inspect seed.img --json
  vminit inspect seed.tar`,
		Args: exactArgs(1, "one IMAGE file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := report.json()
			if err != nil {
				return err
			}
			rep, err := inspectImage(args[0])
			if err != nil {
				return err
			}
			if strict {
				rep.Problems, rep.Warnings = append(rep.Problems, rep.Warnings...), []*spec.FieldError{}
				sortProblems(rep.Problems)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else {
				printInspect(cmd, rep)
			}
			if len(rep.Problems) > 0 {
				return alreadyReported{Err: fmt.Errorf("%d problems", len(rep.Problems))}
			}
			return nil
		},
	}
	report.register(cmd)
	cmd.Flags().BoolVar(&strict, "strict", false, "treat every warning as a problem (user data cloud-init ignores)")
	return cmd
}

// inspectImage reads the seed image at path and reports what is in it and
// what cloud-init would find wrong with it (the report's Problems); an
// error is an image it cannot read.
func inspectImage(path string) (*inspectReport, error) {
	f, err := inputfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	img, err := media.Open(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	rep := &inspectReport{Image: path, Size: st.Size(), Filesystem: img.Format, Label: img.Label,
		Labels: img.Labels, Notes: []string{}, Problems: []*spec.FieldError{}, Warnings: []*spec.FieldError{}}
	if rep.Files, err = inspectFiles(img.FS); err != nil {
		return nil, fmt.Errorf("%s: reading the file tree: %w", path, err)
	}
	if img.Format != media.Tar && st.Size()%alignment != 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d bytes is not a multiple of 4 KiB: QEMU refuses such a raw image on storage with 4 KiB sectors (\"Image size is not a multiple of request alignment\"); vminit build pads to 4 KiB", st.Size()))
	}
	if img.Label == kubevirt.SysprepLabel {
		inspectSysprep(rep, img.FS, kubevirt.SysprepDisc, "a KubeVirt sysprep volume")
		return rep, nil
	}
	s, err := seed.Read(img.FS, img.Label)
	if err != nil && ovirt.SysprepDisc.Holds(img.FS) {
		// oVirt's payload has no label: its answer file, where no
		// cloud-init seed is, says what it is.
		inspectSysprep(rep, img.FS, ovirt.SysprepDisc, "oVirt's sysprep payload")
		return rep, nil
	}
	if err == nil {
		rep.Datasource = string(s.Datasource)
		if img.Format == media.Tar {
			// A tar has no label; the disk made of it will.
			s.Label = s.Datasource.Label()
			rep.Notes = append(rep.Notes, "a tar archive has no label: the disk made from it must be labelled "+s.Label)
		}
		var ws spec.Errors
		ws, err = seed.Check(s)
		rep.Warnings = append(rep.Warnings, ws...)
	}
	if es := spec.AsErrors(err); es != nil {
		rep.Problems = es
	} else if err != nil {
		rep.Problems = spec.Errors{{Message: err.Error()}}
	}
	sortProblems(rep.Problems)
	sortProblems(rep.Warnings)
	return rep, nil
}

// inspectSysprep reports a Windows answer-file disc (what, as the note
// names it) that d describes: a problem where Windows setup would find
// no answer file or stop on one; a note per answer file, the words
// `vminit build` warned with as it wrote the disc (notes, not warnings:
// build --strict does not make them errors either, and they say what
// is not checked, not what is wrong).
func inspectSysprep(rep *inspectReport, fsys fs.FS, d sysprep.Disc, what string) {
	rep.Datasource = "sysprep"
	rep.Notes = append(rep.Notes, "a Windows sysprep answer-file disc ("+what+"), not a cloud-init seed")
	reports, err := d.Check(fsys)
	if err != nil {
		rep.Problems = append(rep.Problems, &spec.FieldError{Message: err.Error()})
	}
	rep.Notes = append(rep.Notes, reports...)
}

// sortProblems orders problems by the file (or field) they name.
func sortProblems(ps []*spec.FieldError) {
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Field < ps[j].Field })
}

// inspectFiles lists the regular files of an image, in fs.WalkDir's
// (lexical) order.
func inspectFiles(fsys fs.FS) ([]inspectFile, error) {
	var files []inspectFile
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
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
		files = append(files, inspectFile{Path: p, Size: info.Size(), Mode: info.Mode().String()})
		return nil
	})
	return files, err
}

func printInspect(cmd *cobra.Command, r *inspectReport) {
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "image:\t%s (%d bytes)\n", r.Image, r.Size)
	fmt.Fprintf(w, "filesystem:\t%s\n", r.Filesystem)
	if r.Filesystem != media.Tar {
		fmt.Fprintf(w, "label:\t%s\n", r.Label)
	}
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
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note:\t%s\n", n)
	}
	if len(r.Warnings) > 0 {
		fmt.Fprintf(w, "warnings:\n")
		for _, p := range r.Warnings {
			fmt.Fprintf(w, "  %v\n", p)
		}
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
