package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/vminit/vminit/internal/bench/mdbench"
)

// A fleet is the same n machines written in each server's own format:
// vminit's spec directory (mdbench.SpecFile, as bench/mdserver's start-up
// benchmark), hegel's flat file (one YAML list, keyed by the public IPv4
// address, the user data inline) and matchbox's data directory (a group
// selecting the machine by MAC, its profile, and its Ignition file).
// Machine i is mdbench.Addr(i) to vminit and hegel and mac(i) to
// matchbox, which selects by labels, not by source address.
type fleet struct {
	dir                           string
	specs, hegelFile, matchboxDir string
}

func writeFleet(dir string, n int) (fleet, error) {
	f := fleet{dir: dir, specs: filepath.Join(dir, "specs"), hegelFile: filepath.Join(dir, "hegel.yaml"), matchboxDir: filepath.Join(dir, "matchbox")}
	for _, d := range []string{f.specs, filepath.Join(f.matchboxDir, "groups"), filepath.Join(f.matchboxDir, "profiles"), filepath.Join(f.matchboxDir, "ignition")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return f, err
		}
	}
	if err := mdbench.WriteSpecs(f.specs, n, mdbench.Addr); err != nil {
		return f, err
	}
	if err := writeHegel(f.hegelFile, n); err != nil {
		return f, err
	}
	return f, writeMatchbox(f.matchboxDir, n)
}

// hegelUserData is about the size of the user data vminit renders for
// mdbench.SpecFile (a user with sudo and a key, a file, a command).
const hegelUserData = `#cloud-config
hostname: vm-%06d
users:
  - name: ops
    sudo: ALL=(ALL) NOPASSWD:ALL
    ssh_authorized_keys: [ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user@example]
write_files:
  - path: /etc/motd
    content: "welcome to vm-%06d\n"
runcmd:
  - [systemctl, enable, --now, app.service]
`

func writeHegel(path string, n int) error {
	out := []byte("[]\n")
	if n > 0 {
		out = out[:0]
	}
	for i := range n {
		out = fmt.Appendf(out, "- userdata: %q\n  metadata:\n    id: vm-%06d\n    hostname: vm-%06d\n    ipv4: {public: %q}\n",
			fmt.Sprintf(hegelUserData, i, i), i, i, mdbench.Addr(i).String())
	}
	return os.WriteFile(path, out, 0o600)
}

func mac(i int) string { return fmt.Sprintf("52:54:00:%02x:%02x:%02x", i>>16&0xff, i>>8&0xff, i&0xff) }

func writeMatchbox(dir string, n int) error {
	for i := range n {
		name := fmt.Sprintf("vm-%06d", i)
		files := map[string]string{
			"groups/" + name + ".json":   fmt.Sprintf(`{"id":%q,"profile":%q,"selector":{"mac":%q}}`, name, name, mac(i)),
			"profiles/" + name + ".json": fmt.Sprintf(`{"id":%q,"ignition_id":%q}`, name, name+".ign"),
			"ignition/" + name + ".ign": fmt.Sprintf(`{"ignition":{"version":"3.4.0"},"passwd":{"users":[{"name":"ops","sshAuthorizedKeys":["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user@example"]}]},`+
				`"storage":{"files":[{"path":"/etc/hostname","contents":{"source":"data:,%s"}}]}}`, name),
		}
		for p, s := range files {
			if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}
