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
}

func (f *seedFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.datasource, "datasource", "nocloud", "seed layout: nocloud (label cidata) or configdrive (label config-2)")
	cmd.Flags().IntVar(&f.networkVersion, "network-config-version", 2, "NoCloud network-config format: 2 (netplan) or 1")
	cmd.RegisterFlagCompletionFunc("datasource", cobra.FixedCompletions(names(seed.Datasources), cobra.ShellCompDirectiveNoFileComp))
}

// load reads the spec and renders its seed, returning every problem.
func (f *seedFlags) load(path string) (*spec.Instance, *seed.Seed, error) {
	ds, err := parseDatasource(f.datasource)
	if err != nil {
		return nil, nil, err
	}
	if f.networkVersion != 1 && f.networkVersion != 2 {
		return nil, nil, usagef("--network-config-version=%d: want 1 or 2", f.networkVersion)
	}
	inst, err := spec.Load(path)
	if err != nil {
		return nil, nil, err
	}
	s, err := seed.Build(inst, ds, seed.Options{NetworkConfigVersion: f.networkVersion})
	if err != nil {
		if es := spec.AsErrors(err); es != nil {
			for _, e := range es {
				e.File = path
			}
		}
		return nil, nil, err
	}
	return inst, s, nil
}

// parseDatasource is seed.ParseDatasource, failing with the usage exit
// code.
func parseDatasource(s string) (seed.Datasource, error) {
	ds, err := seed.ParseDatasource(s)
	if err != nil {
		return "", usagef("--datasource: %v", err)
	}
	return ds, nil
}

// names lists the values of a flag, for its completion.
func names[T ~string](values []T) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}

func newBuildCommand() *cobra.Command {
	var (
		sf        seedFlags
		ig        ignitionFlags
		out, fsys string
		ts, align string
		size      string
		format    string
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
		Args: exactArgs(1, "one SPEC file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usagef("-o OUTPUT is required")
			}
			switch format {
			case "seed":
			case "ignition":
				return ig.build(cmd, args[0], out, sf.datasource, fsys, ts)
			default:
				return usagef("--format=%q: want seed or ignition", format)
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
			if opts.Alignment, err = parseSize("--align", align); err != nil {
				return err
			}
			if opts.Alignment%2048 != 0 {
				return usagef("--align=%s: want a multiple of 2048 bytes, e.g. 4KiB or 1MiB", align)
			}
			if opts.Size, err = parseSize("--size", size); err != nil {
				return err
			}
			_, s, err := sf.load(args[0])
			if err != nil {
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
	cmd.Flags().StringVar(&format, "format", "seed", "what to build: seed (cloud-init) or ignition (a .ign config, or a config drive carrying it when -o ends in .iso or .img)")
	cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"seed", "ignition"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.Flags().StringVarP(&out, "output", "o", "", "output file (or directory with --fs dir; - for standard output)")
	cmd.Flags().StringVar(&fsys, "fs", "", "image format: iso9660, vfat, tar or dir (default: from the output's extension, else iso9660)")
	cmd.Flags().StringVar(&ts, "timestamp", "", "the one timestamp in the image, Unix seconds or RFC 3339 (default $SOURCE_DATE_EPOCH, else 0)")
	cmd.Flags().StringVar(&align, "align", "4KiB", "pad an ISO image to a multiple of this size (4KiB for QEMU; 1MiB for cylinder alignment)")
	cmd.Flags().StringVar(&size, "size", "0", "VFAT image size, e.g. 1MiB (default: the smallest that fits)")
	cmd.RegisterFlagCompletionFunc("fs", cobra.FixedCompletions(names(media.Formats), cobra.ShellCompDirectiveNoFileComp))
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
