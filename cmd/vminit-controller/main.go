// Command vminit-controller reconciles vminit's Instance objects and
// KubeVirt VirtualMachines in a Kubernetes cluster (deploy/kubernetes runs
// it). It is apart from vminit so that the vminit command does not carry
// client-go's typed clientset; see 'vminit-controller --help'.
package main

import (
	"os"

	"github.com/vminit/vminit/cmd/internal/controllercmd"
)

func main() {
	os.Exit(controllercmd.Main(os.Args[1:], os.Stdout, os.Stderr))
}
