package run

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vminit/vminit/internal/lib/inputfile"
	"github.com/vminit/vminit/internal/lib/qemu"
)

// An image that names other files makes QEMU give them to the guest (a
// backing file is read through the guest's disk, a data file is read and
// written) or connect out (a protocol). A user who boots an image does
// not expect either, so both are refused unless AllowBackingFiles; a
// protocol is refused always. The image's headers are read first, without
// QEMU (package qemu's Dependencies), then QEMU's own view of the chain
// (qemu-img info --backing-chain) must agree: what the first read missed,
// the second catches.

// checkInputs makes the paths of the files the guest boots from absolute
// (QEMU runs in the temporary directory) and checks them: the kernel and
// initrd are regular files (a FIFO is refused, not waited on), the image
// is a disk image whose chain checkImage accepts. It returns the image,
// nil without one.
func (c *config) checkInputs(ctx context.Context) (*qemu.Image, error) {
	for _, p := range []struct {
		flag string
		path *string
	}{{"image", &c.Image}, {"overlay", &c.Overlay}, {"kernel", &c.Kernel}, {"initrd", &c.Initrd}} {
		if *p.path == "" {
			continue
		}
		abs, err := filepath.Abs(*p.path)
		if err != nil {
			return nil, fmt.Errorf("run: --%s: %w", p.flag, err)
		}
		*p.path = abs
		if p.flag == "kernel" || p.flag == "initrd" {
			f, err := inputfile.Open(abs)
			if err != nil {
				return nil, fmt.Errorf("run: --%s: %w", p.flag, err)
			}
			f.Close()
		}
	}
	if c.Image == "" {
		return nil, nil
	}
	img, err := qemu.DetectImage(c.Image, c.ImageFormat)
	if err != nil {
		return nil, fmt.Errorf("run: --image %w", err)
	}
	if img.BareFS && c.Kernel == "" {
		return nil, fmt.Errorf("run: --image %s is a bare %s without a boot loader: give the kernel to boot it with (--kernel, --initrd, --append root=/dev/vda)", c.Image, img.Kind)
	}
	if err := checkImage(ctx, c.Image, img.Format, c.AllowBackingFiles); err != nil {
		return nil, fmt.Errorf("run: --image %w", err)
	}
	return img, nil
}

// checkImage refuses an image, read as format, whose chain names a file
// or a protocol it may not; every problem is listed.
func checkImage(ctx context.Context, image, format string, allow bool) error {
	deps, err := qemu.Dependencies(image, format)
	if err != nil {
		return err
	}
	var problems []string
	for _, d := range deps {
		switch {
		case d.Protocol:
			problems = append(problems, d.String()+": vminit run never opens one")
		case d.Kind == kindBacking && d.Format == "":
			problems = append(problems, d.String()+" without its format: QEMU would probe it")
		case d.Kind == kindBacking && !slices.Contains(qemu.Formats, d.Format):
			problems = append(problems, fmt.Sprintf("%s of format %s: vminit run reads only %s chains (another format can name files of its own, as a VMDK's extents)",
				d, d.Format, strings.Join(qemu.Formats, " and ")))
		case !allow:
			problems = append(problems, d.String())
		default:
			if err := regularFile(d.Path); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", d, err))
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s; the guest would read (or write) what they name: use an image without them (qemu-img convert -O qcow2 IN OUT), or pass --allow-backing-files if you trust every local file named%s",
			strings.Join(problems, "; "), rawHint(image, format))
	}
	chain, err := qemu.Chain(ctx, image, format)
	if err != nil {
		return err
	}
	return agree(image, chain, deps)
}

// regularFile refuses a dependency QEMU would block opening (a FIFO) or
// that is not a file (a device), as inputfile does for the image itself.
func regularFile(path string) error {
	f, err := inputfile.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// rawHint suggests --image-format raw for a disk probed as qcow2.
func rawHint(image, format string) string {
	if format != qemu.QCOW2 {
		return ""
	}
	return fmt.Sprintf(" (if %s is a raw disk, give --image-format raw: nothing is then read from its first bytes)", image)
}

const (
	kindBacking  = "backing file"
	kindDataFile = "data file"
)

// agree checks that QEMU opens the files the headers name, and no other.
func agree(image string, chain []qemu.ChainImage, deps []qemu.Dependency) error {
	var want []string
	for _, d := range deps {
		want = append(want, d.Kind+" "+filepath.Clean(d.Path))
	}
	var got []string
	for i, c := range chain {
		if df := c.FormatSpecific.Data.DataFile; df != "" {
			got = append(got, kindDataFile+" "+filepath.Clean(dataFilePath(c.Filename, df)))
		}
		if i+1 < len(chain) {
			got = append(got, kindBacking+" "+filepath.Clean(chain[i+1].Filename))
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		return fmt.Errorf("%s: QEMU opens %q, but its headers name %q: refused", image, got, want)
	}
	return nil
}

// dataFilePath is where QEMU opens a data file named in image.
func dataFilePath(image, name string) string {
	if qemu.IsProtocol(name) || filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(filepath.Dir(image), name)
}

// overlay creates the copy-on-write overlay QEMU boots, or checks that a
// kept overlay is one over this image. The base image is opened read-only
// by QEMU as the overlay's backing file and never written. A new overlay
// is created 0600 (it holds the guest's disk), by this process, so a
// file or link put there meanwhile is not written through.
func overlay(ctx context.Context, img *qemu.Image, abs, path string) error {
	if _, err := os.Lstat(path); err == nil {
		return checkOverlay(ctx, abs, img.Format, path)
	}
	qemuImg, err := qemu.Find(qemu.Img)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	out, err := exec.CommandContext(ctx, qemuImg, "create", "-q", "-f", qemu.QCOW2, "-F", img.Format, "-b", abs, path).CombinedOutput()
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("qemu-img create %s: %v: %s", path, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// checkOverlay uses a kept overlay only when it is a qcow2 whose sole
// dependency is base (read as baseFormat): another backing file would
// boot another disk, a data file would let the guest write a host file.
func checkOverlay(ctx context.Context, base, baseFormat, path string) error {
	refuse := func(why string) error {
		return fmt.Errorf("overlay %s exists but is not a qcow2 overlay of %s (%s): remove it or give another path", path, base, why)
	}
	if _, err := qemu.DetectImage(path, qemu.QCOW2); err != nil {
		return refuse(err.Error())
	}
	deps, err := qemu.Dependencies(path, qemu.QCOW2)
	if err != nil {
		return refuse(err.Error())
	}
	if len(deps) == 0 || deps[0].Kind != kindBacking || deps[0].Path != base || deps[0].Format != baseFormat {
		var named []string
		for _, d := range deps {
			named = append(named, d.String())
		}
		return refuse("it names " + orNone(named))
	}
	chain, err := qemu.Chain(ctx, path, qemu.QCOW2)
	if err != nil {
		return err
	}
	return agree(path, chain, deps)
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "no backing file"
	}
	return strings.Join(s, "; ")
}
