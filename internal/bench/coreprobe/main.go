// Command coreprobe is the floor of `vminit build` and `vminit version` as
// whole processes (docs/benchmarks.md, "Whole process"): cobra and the
// packages a NoCloud seed build needs (spec, seed, media, with cloudconfig
// and network), and nothing else vminit links: no platform reader, no
// metadata server, no Kubernetes client. What it costs beyond a hello-world
// binary is what those packages cost at start-up; what vminit costs beyond
// it is the rest of the command.
//
//	go build -trimpath -ldflags="-s -w" -o /tmp/coreprobe ./internal/bench/coreprobe
//	/tmp/coreprobe build examples/dev-vm.yaml -o /tmp/x.iso
//	/tmp/coreprobe version
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	_ "github.com/vminit/vminit/cloudconfig" // linked by every vminit, as by convert
	"github.com/vminit/vminit/media"
	_ "github.com/vminit/vminit/network"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

func main() {
	root := &cobra.Command{Use: "coreprobe", SilenceUsage: true}
	var out string
	buildCmd := &cobra.Command{Use: "build SPEC -o FILE", Args: cobra.ExactArgs(1), RunE: func(_ *cobra.Command, args []string) error {
		return build(args[0], out)
	}}
	buildCmd.Flags().StringVarP(&out, "output", "o", "", "the NoCloud ISO9660 image to write")
	version := &cobra.Command{Use: "version", Run: func(*cobra.Command, []string) { fmt.Println("coreprobe") }}
	root.AddCommand(buildCmd, version)
	if root.Execute() != nil {
		os.Exit(1)
	}
}

// build writes the NoCloud ISO9660 seed of the spec at path to out, as
// `vminit build path -o out` does for a .iso.
func build(path, out string) error {
	inst, err := spec.Load(path)
	if err != nil {
		return err
	}
	s, err := seed.Build(inst, seed.NoCloud, seed.Options{})
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := media.Write(f, s, media.ISO9660, media.Options{ModTime: time.Unix(0, 0)}); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
