// Package servekit is the serve command's definition, which vminit
// (`vminit serve`), vminit-server and vminit-node share: its help, its
// flags, their checks together, and how they become the options of
// cmd/internal/serve, which runs the server. A program adds what is its
// own around it (vminit-server's etcd store, StoreFlags; vminit-node's
// interception; vminit's hint that names vminit-server).
//
// It imports no program's command tree (cmd/internal/cli and the other
// *cmd packages): vminit-server and vminit-node link serve and the kit
// (cmd/internal/cmdkit), not vminit's CLI (cmd/vminit's
// TestLeanGraph).
package servekit

import "github.com/vminit/vminit/cmd/internal/cmdkit"

// usagef is the kit's usage error, under the name serve.go had in
// cmd/internal/cli.
var usagef = cmdkit.Usagef
