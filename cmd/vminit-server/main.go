// Command vminit-server is the metadata server with every store: `vminit
// serve`'s flags, and etcd's (--etcd-endpoints). It is apart from vminit
// so that the vminit command does not carry etcd's client and its
// start-up; see 'vminit-server --help'.
package main

import (
	"os"

	"github.com/vminit/vminit/cmd/internal/servercmd"
)

func main() {
	os.Exit(servercmd.Main(os.Args[1:], os.Stdout, os.Stderr))
}
