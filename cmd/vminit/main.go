// Command vminit builds first-boot configuration for virtual machines: it
// renders an instance spec to cloud-init seeds and writes them as ISO9660 or
// VFAT images, in-process and byte-reproducible. See 'vminit --help'.
package main

import (
	"os"

	"github.com/vminit/vminit/cmd/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
