package cli

import (
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/delivery"
	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/media"
	"github.com/vminit/vminit/render"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// buildFlags are build's own flags, beside the shared ones.
type buildFlags struct {
	in     inputFlags
	target targetFlags
	out    outputFlags
	fsys   string
	ts     string
	align  string
	size   string

	// Ignition delivery: a pointer config for a config too large for
	// --transport.
	publishURL string
	publishOut string
	headers    []string
	sysprepOut string

	// ud are the flags of a raw user-data input (build_userdata.go).
	ud userDataFlags
}

func newBuildCommand() *cobra.Command {
	var f buildFlags
	cmd := &cobra.Command{
		Use:   "build SPEC -o OUTPUT | build USER-DATA [META-DATA] -o SEED",
		Short: "Build a seed image or an Ignition config from an instance spec",
		Long: `Build renders the spec for its guest agent and writes the result:

  cloud-init (spec.agent: cloud-init, the default): a seed, NoCloud (label
  cidata) or ConfigDrive (label config-2), as an ISO9660 image with Rock Ridge
  and Joliet (.iso), a VFAT image (.img, .vfat, .fat), a tar archive (.tar) or
  a directory (--fs dir);

  Ignition (spec.agent: ignition, or --format ignition): the config as a .ign
  (or .json) file for QEMU fw_cfg, libvirt or guestinfo (see 'vminit deliver'),
  or on a config drive (.iso, .img) for Ignition's openstack and kubevirt
  platforms; --transport checks a size budget and --publish-url makes a
  sha512-verified pointer config when the config is too large for it.

Every check 'vminit validate' runs runs first; problems with the user's
cloud-config against cloud-init's schema are warnings here (--strict: errors).
The output is written to a temporary file and renamed into place only when
complete, with permissions 0600 unless --mode says otherwise. SPEC - reads the
spec from standard input; -o - writes the output to standard output.

Given cloud-init user data instead of a spec (a #cloud-config document, a
#! script, a MIME message), build takes what cloud-localds takes: USER-DATA
[META-DATA] (without META-DATA, cloud-localds's: instance-id iid-local01),
--network-config FILE and --vendor-data FILE, put as given onto a NoCloud
seed, each checked as cloud-init reads it and a #cloud-config against
cloud-init's schema. 'vminit convert USER-DATA --to spec' makes a spec of it.

Timestamps come from --timestamp, else $SOURCE_DATE_EPOCH, else the Unix
epoch: the same spec always gives the same bytes.`,
		Example: `  vminit build examples/dev-vm.yaml -o seed.iso
  vminit build examples/ubuntu-server/instance.yaml -o seed.img
  vminit build instance.yaml -o config.iso --datasource configdrive --align 1MiB
  vminit build examples/fcos-server.yaml -o config.ign
  vminit build examples/fcos-server.yaml -o config.iso --datasource configdrive
  vminit build instance.yaml --format ignition --transport ec2 \
    --publish-url https://cfg.example.com/web-1.ign --publish-out full.ign -o user-data.ign
  cat instance.yaml | vminit build - -o seed.iso
  vminit build user-data meta-data --network-config network-config -o seed.iso`,
		Args: minArgs(1, "a SPEC file (- for standard input), files of platform objects, or USER-DATA [META-DATA]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, args)
		},
	}
	f.in.register(cmd)
	f.target.register(cmd)
	f.out.register(cmd, "output file (.iso, .img, .tar, .ign…; - for standard output), or directory with --fs dir")
	fl := cmd.Flags()
	fl.StringVar(&f.fsys, "fs", "", "seed medium: iso9660, vfat, tar or dir (default: from the output's extension)")
	fl.StringVar(&f.ts, "timestamp", "", "the one timestamp in the image, Unix seconds or RFC 3339 (default: $SOURCE_DATE_EPOCH, else 0)")
	fl.StringVar(&f.align, "align", "4KiB", "pad an ISO image to a multiple of this size (4KiB for QEMU; 1MiB for cylinder alignment)")
	fl.StringVar(&f.size, "size", "", "VFAT image size, e.g. 1MiB (default: the smallest that fits)")
	fl.StringVar(&f.publishURL, "publish-url", "", "Ignition, with --transport: when the config is too large, emit a pointer config fetching it from this URL")
	fl.StringVar(&f.publishOut, "publish-out", "", "with --publish-url: where to write the full config to upload there")
	fl.StringArrayVar(&f.headers, "publish-header", nil, "with --publish-url: an HTTP header for the fetch, Name: value (repeatable)")
	fl.StringVar(&f.sysprepOut, "sysprep-out", "", "KubeVirt: where to write the VM's sysprep answer-file disc (label unattendCD) besides its cloud-init seed")
	f.ud.register(cmd)
	cmd.RegisterFlagCompletionFunc("fs", cobra.FixedCompletions(formatList(), cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func formatList() []string {
	var out []string
	for _, f := range media.Formats {
		out = append(out, string(f))
	}
	return out
}

func (f *buildFlags) run(cmd *cobra.Command, paths []string) error {
	out := f.out.path
	if out == "" {
		return usagef("-o OUTPUT is required")
	}
	perm, err := f.out.perm()
	if err != nil {
		return err
	}
	if f.publishURL != "" && f.publishOut == "" {
		return usagef("--publish-url needs --publish-out FILE for the full config")
	}
	if f.publishURL != "" && f.target.transport == "" {
		return usagef("--publish-url needs --transport: the budget that decides whether the config is published")
	}
	opts, err := f.mediaOptions()
	if err != nil {
		return err
	}
	t, err := f.target.target()
	if err != nil {
		return err
	}
	if f.fsys != "" {
		if _, err := media.ParseFormat(f.fsys); err != nil {
			return usageError{Err: err}
		}
	}
	// Flags are checked first: a usage error says so before any file is
	// read.
	userData, err := f.readUserData(cmd, paths[0])
	if err != nil {
		return err
	}
	if userData != nil {
		return f.buildUserData(cmd, paths, userData, opts, perm)
	}
	if f.ud.networkConfig != "" || f.ud.vendorData != "" {
		return usagef("--network-config and --vendor-data are for a USER-DATA file (cloud-localds's input); a spec's are spec.network and spec.cloudInit.vendorData")
	}
	in, err := f.in.loadOne(cmd, paths)
	if err != nil {
		return err
	}
	if in.inst == nil {
		// A Windows VM with only a sysprep disc: that disc is the output,
		// so a second place to write it would do nothing.
		if f.sysprepOut != "" {
			return usagef("--sysprep-out: %s has only a sysprep volume, which -o writes; drop --sysprep-out", in.name)
		}
		format, err := f.mediaFormat(out, false)
		if err == nil {
			err = checkTarget(out, format == media.Dir)
		}
		if err != nil {
			return err
		}
		return f.writeSeed(cmd, in.result.Sysprep, format, opts, perm)
	}
	ignitionOut := agentOf(in.inst, t) == spec.AgentIgnition
	format, err := f.mediaFormat(out, ignitionOut)
	if err != nil {
		return err
	}
	if err := checkTarget(out, format == media.Dir); err != nil {
		return err
	}
	// An Ignition config's budget is applied below, where a pointer
	// config may answer it; cloud-init's user data's by render.
	transport := t.Transport
	if ignitionOut {
		t.Transport = ""
	}
	t.LenientSchema = true
	rep := render.Instance(in.inst, t)
	printWarnings(cmd, in, rep.Warnings)
	if !rep.OK() {
		return in.locate(rep.Errors)
	}
	if ignitionOut {
		return f.writeIgnition(cmd, in.inst, rep.Ignition, t.DatasourceFor(in.inst), transport, format, opts, perm)
	}
	if err := writeSysprep(cmd, in, f.sysprepOut, format, opts, perm); err != nil {
		return err
	}
	return f.writeSeed(cmd, rep.Seed, format, opts, perm)
}

// mediaOptions reads --timestamp, --align and --size.
func (f *buildFlags) mediaOptions() (media.Options, error) {
	var opts media.Options
	var err error
	if opts.ModTime, err = timestamp(f.ts); err != nil {
		return opts, err
	}
	if opts.Alignment, err = parseSize("--align", f.align); err != nil {
		return opts, err
	}
	if opts.Alignment%2048 != 0 {
		return opts, usagef("--align=%s: want a multiple of 2048 bytes, e.g. 4KiB or 1MiB", f.align)
	}
	if f.size != "" {
		if opts.Size, err = parseSize("--size", f.size); err != nil {
			return opts, err
		}
	}
	return opts, nil
}

// noMedium is mediaFormat's answer for an Ignition config written as a
// file rather than on a config drive.
const noMedium media.Format = ""

// mediaFormat decides the medium from --fs or the output's name; an
// Ignition config may also be a plain .ign or .json file (noMedium).
func (f *buildFlags) mediaFormat(out string, ignitionOut bool) (media.Format, error) {
	if f.fsys != "" {
		format, err := media.ParseFormat(f.fsys)
		if err != nil {
			return "", usageError{Err: err}
		}
		return format, nil
	}
	ext := strings.ToLower(filepath.Ext(out))
	if ignitionOut && (ext == ".ign" || ext == ".json" || isStream(out)) {
		return noMedium, nil
	}
	if isStream(out) {
		return media.ISO9660, nil
	}
	format, ok := media.FormatFor(out)
	if !ok {
		if err := checkTarget(out, false); err != nil {
			return "", err // a directory, a device: say that first
		}
		if ignitionOut {
			return "", usagef("-o %s: name the output .ign or .json for the config itself, or .iso, .img or .tar for a config drive carrying it (or give --fs)", out)
		}
		return "", usagef("-o %s: name the seed .iso (ISO9660), .img (VFAT) or .tar, or give --fs iso9660|vfat|tar|dir", out)
	}
	return format, nil
}

func (f *buildFlags) writeSeed(cmd *cobra.Command, s *seed.Seed, format media.Format, opts media.Options, perm fs.FileMode) error {
	out := f.out.path
	if format == media.Dir {
		if err := writeDir(out, perm, func(r *os.Root) error { return s.WriteRoot(r, perm) }); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: %s seed, %d files\n", out, s.Datasource, len(s.Files))
		return nil
	}
	var n countingWriter
	err := writeFile(cmd, out, perm, func(w io.Writer) error {
		n.w = w
		return media.Write(&n, s, format, opts)
	})
	if err != nil {
		return err
	}
	if !isStream(out) {
		label := media.VolumeLabel(s, format)
		if label == "" {
			label = "none"
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: %s %s, label %s, %d files, %d bytes\n",
			out, s.Datasource, format, label, len(s.Files), n.n)
	}
	return nil
}

// writeIgnition fits the config to its transport and writes it, as a
// file or on a config drive.
func (f *buildFlags) writeIgnition(cmd *cobra.Command, inst *spec.Instance, res *ignition.Result, ds seed.Datasource, transport string, format media.Format, opts media.Options, perm fs.FileMode) error {
	out, stderr := f.out.path, cmd.ErrOrStderr()
	config := res.Config
	var fitNote string
	if transport != "" {
		t, _ := delivery.LookupTransport(transport) // checked by target()
		headers := http.Header{}
		for _, h := range f.headers {
			k, v, ok := strings.Cut(h, ":")
			if !ok {
				return usagef("--publish-header=%q: want Name: value", h)
			}
			headers.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		}
		payload, publish, err := delivery.Fit(config, t, f.publishURL, headers)
		if err != nil {
			return err
		}
		if publish != nil {
			if err := writeFile(cmd, f.publishOut, perm, func(w io.Writer) error { _, err := w.Write(publish); return err }); err != nil {
				return err
			}
			fitNote = fmt.Sprintf("a pointer config: the config (%d bytes) exceeds %s, so %s fetches it from %s and checks its sha512; upload %s there",
				t.Size(publish), t.Source, out, f.publishURL, f.publishOut)
		} else {
			fitNote = fmt.Sprintf("fits %s (%d of %d bytes); no pointer config needed", t.Source, t.Size(config), t.Limit)
		}
		config = payload
	}
	if format == noMedium {
		if err := writeFile(cmd, out, perm, func(w io.Writer) error { _, err := w.Write(config); return err }); err != nil {
			return err
		}
		if isStream(out) {
			return nil
		}
		fmt.Fprintf(stderr, "wrote %s: Ignition %s, %d bytes\n", out, res.Version, len(config))
		if fitNote != "" {
			fmt.Fprintf(stderr, "  %s\n", fitNote)
		} else if abs, err := filepath.Abs(out); err == nil {
			fmt.Fprintf(stderr, "  QEMU: %s\n  (vminit deliver %s --to libvirt|guestinfo|qemu-disk for the other hypervisors)\n", shellJoin(delivery.QEMUArgs(abs)), out)
		}
		return nil
	}
	// A config drive carrying the config, for Ignition's openstack,
	// kubevirt, proxmoxve and ibmcloud platforms.
	s, err := delivery.Seed(config, inst, ds)
	if err != nil {
		return err
	}
	if err := f.writeSeed(cmd, s, format, opts, perm); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "  carrying Ignition %s for Ignition's openstack, kubevirt and proxmoxve platforms\n", res.Version)
	if fitNote != "" {
		fmt.Fprintf(stderr, "  %s\n", fitNote)
	}
	return nil
}

// printWarnings prints warnings, each with its file and line.
func printWarnings(cmd *cobra.Command, in *specInput, ws spec.Errors) {
	for _, w := range in.locate(ws) {
		fmt.Fprintf(cmd.ErrOrStderr(), "vminit: warning: %v\n", w)
	}
}

// countingWriter counts what passes through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
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
