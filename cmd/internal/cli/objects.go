package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/cloudbaseinit"
	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/media"
)

// isObjects reports whether convert's files are to be read as platform
// objects rather than cloud-init user data: user data is what cloud-init
// itself recognises (a #cloud-config, #!, #include... start, a MIME
// message or gzip), and anything else is read as objects, so that a
// manifest of a kind vminit does not read or broken YAML is
// refused naming what it is, never wrapped as user data that cloud-init
// would ignore.
// Standard input, read to decide, is given back to whichever reads it next.
func (f *inputFlags) isObjects(cmd *cobra.Command, paths []string) bool {
	data, err := f.read(cmd, paths[0])
	if paths[0] == "-" {
		cmd.SetIn(bytes.NewReader(data))
	}
	if err != nil {
		return false // the reader of user data reports it
	}
	return !isUserData(data) && !isIgnitionConfig(data) && !isWindowsUserData(data)
}

// isWindowsUserData reports whether data is user data only cloudbase-init
// runs: a PowerShell, cmd or EC2 <powershell>/<script> script that
// cloud-init would ignore.
func isWindowsUserData(data []byte) bool {
	if isUserData(data) {
		return false
	}
	f, err := cloudbaseinit.Classify(data)
	return err == nil && f.Kind == cloudbaseinit.KindScript
}

// isIgnitionConfig reports whether data is an Ignition config: a JSON
// object with an "ignition" key and no "kind" (a platform object in JSON
// has one).
func isIgnitionConfig(data []byte) bool {
	if !ignition.LooksLikeConfig(data) {
		return false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return false
	}
	_, ign := top["ignition"]
	_, kind := top["kind"]
	return ign && !kind
}

// isUserData reports whether cloud-init reads data as user data of a kind
// it knows.
func isUserData(data []byte) bool {
	if cloudinit.PartType(data) != "" || bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		return true
	}
	head := strings.ToLower(string(bytes.TrimLeft(data[:min(len(data), 64)], " \t\r\n")))
	return strings.HasPrefix(head, "content-type:") || strings.HasPrefix(head, "mime-version:")
}

// writeSysprep writes a KubeVirt VM's sysprep disc to path, when the VM
// has one besides its cloud-init seed (alone, it is build's output).
func writeSysprep(cmd *cobra.Command, in *specInput, path string, format media.Format, opts media.Options, perm fs.FileMode) error {
	if in.result == nil || in.result.Sysprep == nil || in.inst == nil {
		if path != "" {
			return usagef("--sysprep-out: %s has no sysprep volume besides its cloud-init data", in.name)
		}
		return nil
	}
	if path == "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "vminit: warning: %s also has a sysprep disc; pass --sysprep-out FILE to write it\n", in.name)
		return nil
	}
	s := in.result.Sysprep
	if format == media.Dir {
		return writeDir(path, perm, func(r *os.Root) error { return s.WriteRoot(r, perm) })
	}
	return writeFile(cmd, path, perm, func(w io.Writer) error { return media.Write(w, s, format, opts) })
}

// convertObjects prints the vminit spec (or the Ignition config) of one
// platform VM.
func convertObjects(cmd *cobra.Command, in *inputFlags, paths []string, to, out string, perm fs.FileMode, iopts ignition.Options) error {
	si, err := in.loadOne(cmd, paths)
	if err != nil {
		return err
	}
	if si.inst == nil {
		return fmt.Errorf("%s has only a sysprep answer-file disc, which no vminit spec carries", si.name)
	}
	result := si.result.Spec
	if to == "ignition" {
		res, err := ignition.Render(si.inst, iopts)
		if err != nil {
			return err
		}
		for _, w := range res.Warnings {
			fmt.Fprintf(cmd.ErrOrStderr(), "vminit: warning: %s\n", w)
		}
		result = res.Config
	}
	if si.result.Sysprep != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "vminit: warning: %s also has a sysprep disc, which the spec does not carry (vminit build --sysprep-out writes it)\n", si.name)
	}
	if out == "" {
		out = "-"
	}
	return writeFile(cmd, out, perm, func(w io.Writer) error { _, err := w.Write(result); return err })
}
