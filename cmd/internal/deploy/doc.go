// Package deploy holds the tests of the repository's deploy/ folder (the
// Kubernetes manifests and their shapes, the systemd units) and nothing
// else. They hold the files to the programs that run them: every
// container's and unit's command line is parsed by that program's own
// command (cli, controllercmd, servercmd, nodecmd), and the controller
// runs under the manifests' RBAC in a real API server. They stand under
// cmd/internal since Go's internal rule lets only cmd/ import the
// programs; TestMain runs them in deploy/, so the paths they read are the
// folder's own.
package deploy
