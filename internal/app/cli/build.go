package cli

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/internal/lib/atomicfile"
	"github.com/vminit/vminit/media"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// seedFlags are the flags every command that renders a seed shares.
type seedFlags struct {
	datasource     string
	networkVersion int
	obj            objectFlags
}

func (f *seedFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.datasource, "datasource", "", "seed layout: nocloud (label cidata) or configdrive (label config-2) (default: the spec's datasource, else nocloud)")
	cmd.Flags().IntVar(&f.networkVersion, "network-config-version", 2, "NoCloud network-config format: 2 (netplan) or 1")
	cmd.RegisterFlagCompletionFunc("datasource", cobra.FixedCompletions([]string{"nocloud", "configdrive"}, cobra.ShellCompDirectiveNoFileComp))
	f.obj.register(cmd)
}

// load reads the spec (or the platform objects) in paths and renders its
// seed, returning every problem. A Windows VM's sysprep disc comes back as
// the seed when the VM has no instance.
func (f *seedFlags) load(cmd *cobra.Command, paths []string) (*loaded, *seed.Seed, error) {
	if f.networkVersion != 1 && f.networkVersion != 2 {
		return nil, nil, usagef("--network-config-version=%d: want 1 or 2", f.networkVersion)
	}
	if f.datasource != "" {
		if _, err := parseDatasource(f.datasource); err != nil {
			return nil, nil, err
		}
	}
	l, err := f.obj.loadOne(cmd.Context(), paths, cmd.ErrOrStderr())
	if err != nil {
		return nil, nil, err
	}
	s, err := f.seedOf(l)
	return l, s, err
}

// seedOf renders the seed of a loaded instance.
func (f *seedFlags) seedOf(l *loaded) (*seed.Seed, error) {
	if l.inst == nil {
		return l.result.Sysprep, nil
	}
	ds, err := parseDatasource(datasourceOf(f.datasource, l.inst))
	if err != nil {
		return nil, err
	}
	s, err := seed.Build(l.inst, ds, seed.Options{NetworkConfigVersion: f.networkVersion})
	if err != nil {
		if es := spec.AsErrors(err); es != nil && l.result == nil {
			for _, e := range es {
				e.File = l.path
			}
		}
		return nil, err
	}
	return s, nil
}

func parseDatasource(s string) (seed.Datasource, error) {
	switch s {
	case "nocloud":
		return seed.NoCloud, nil
	case "configdrive":
		return seed.ConfigDrive, nil
	}
	return "", usagef("--datasource=%q: want nocloud or configdrive", s)
}

func newBuildCommand() *cobra.Command {
	var (
		sf         seedFlags
		ig         ignitionFlags
		out, fsys  string
		ts, align  string
		size       string
		format     string
		sysprepOut string
	)
	cmd := &cobra.Command{
		Use:   "build SPEC -o OUTPUT",
		Short: "Build a seed image from an instance spec",
		Long: `Build renders the spec and writes a seed image: ISO9660 with Rock Ridge and
Joliet (default), VFAT, a tar archive, or a directory. The output is written
to a temporary file and renamed into place only when complete. With -o - the
image goes to standard output.

Timestamps come from --timestamp, else $SOURCE_DATE_EPOCH, else the Unix
epoch: the same spec always gives the same bytes.`,
		Example: `  vminit build examples/dev-vm.yaml -o seed.iso
  vminit build examples/fcos-server.yaml --format ignition -o config.ign
  vminit build instance.yaml -o seed.img --fs vfat
  vminit build instance.yaml -o config.iso --datasource configdrive --align 1MiB`,
		Args: minArgs(1, "a SPEC file, or files of platform objects"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usagef("-o OUTPUT is required")
			}
			switch format {
			case "seed", "":
			case "ignition":
			default:
				return usagef("--format=%q: want seed or ignition", format)
			}
			if sf.datasource != "" {
				if _, err := parseDatasource(sf.datasource); err != nil {
					return err
				}
			}
			l, err := sf.obj.loadOne(cmd.Context(), args, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if format == "" && l.inst != nil && l.inst.Spec.Agent == spec.AgentIgnition {
				format = "ignition"
			}
			if format == "ignition" {
				if l.inst == nil {
					return fmt.Errorf("%s has only a sysprep disc, no Ignition config", l.path)
				}
				return ig.build(cmd, l, out, datasourceOf(sf.datasource, l.inst), fsys, ts)
			}
			mediaFormat := media.FormatFor(out)
			if fsys != "" {
				var err error
				if mediaFormat, err = media.ParseFormat(fsys); err != nil {
					return usageError{err}
				}
			}
			mtime, err := timestamp(ts)
			if err != nil {
				return err
			}
			opts := media.Options{ModTime: mtime}
			if sf.networkVersion != 1 && sf.networkVersion != 2 {
				return usagef("--network-config-version=%d: want 1 or 2", sf.networkVersion)
			}
			if opts.Alignment, err = parseSize("--align", align); err != nil {
				return err
			}
			if opts.Alignment%2048 != 0 {
				return usagef("--align=%s: want a multiple of 2048 bytes, e.g. 4KiB or 1MiB", align)
			}
			if opts.Size, err = parseSize("--size", size); err != nil {
				return err
			}
			s, err := sf.seedOf(l)
			if err != nil {
				return err
			}
			if err := writeSysprep(cmd, l, sysprepOut, mediaFormat, opts); err != nil {
				return err
			}
			if mediaFormat == media.Dir {
				return atomicfile.WriteDir(out, func(dir string) error { return media.WriteDir(dir, s) })
			}
			write := func(w io.Writer) error { return media.Write(w, s, mediaFormat, opts) }
			if out == "-" {
				return write(cmd.OutOrStdout())
			}
			if err := atomicfile.Write(out, 0o644, write); err != nil {
				return err
			}
			st, err := os.Stat(out)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: %s %s, label %s, %d files, %d bytes\n",
				out, s.Datasource, mediaFormat, s.Label, len(s.Files), st.Size())
			return nil
		},
	}
	sf.register(cmd)
	ig.register(cmd)
	cmd.Flags().StringVar(&format, "format", "", "what to build: seed (cloud-init) or ignition (a .ign config, or a config drive carrying it when -o ends in .iso or .img) (default: from the spec's agent)")
	cmd.Flags().StringVar(&sysprepOut, "sysprep-out", "", "KubeVirt: where to write the VM's sysprep answer-file disc (label unattendCD) besides its cloud-init seed")
	cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"seed", "ignition"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.Flags().StringVarP(&out, "output", "o", "", "output file (or directory with --fs dir; - for standard output)")
	cmd.Flags().StringVar(&fsys, "fs", "", "image format: iso9660, vfat, tar or dir (default: from the output's extension, else iso9660)")
	cmd.Flags().StringVar(&ts, "timestamp", "", "the one timestamp in the image, Unix seconds or RFC 3339 (default $SOURCE_DATE_EPOCH, else 0)")
	cmd.Flags().StringVar(&align, "align", "4KiB", "pad an ISO image to a multiple of this size (4KiB for QEMU; 1MiB for cylinder alignment)")
	cmd.Flags().StringVar(&size, "size", "0", "VFAT image size, e.g. 1MiB (default: the smallest that fits)")
	cmd.RegisterFlagCompletionFunc("fs", cobra.FixedCompletions([]string{"iso9660", "vfat", "tar", "dir"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// parseSize reads a byte count with an optional KiB, MiB or GiB suffix.
func parseSize(flag, s string) (int64, error) {
	num, mult := s, int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<40)/mult {
		return 0, usagef("%s=%q: want a size such as 4096, 4KiB or 1MiB", flag, s)
	}
	return n * mult, nil
}
