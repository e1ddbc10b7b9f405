package render_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/render"
	"github.com/vminit/vminit/spec"
)

// TestKeysInRawConfigs: the SSH keys inside a raw cloud-config, Ignition
// config or Butane are judged by the rule of the spec's own keys
// (spec.AuthorizedKeyProblem): a key sshd skips is an error naming the
// config and the key, one that only looks odd a warning.
func TestKeysInRawConfigs(t *testing.T) {
	const joined = "ssh-ed25519AAAAC3NzaC1lZDI1NTE5AAAAIPL3axFGHI3db9iJWkPXVbYzD7OaWTtHuqmxLvj+DztB user@example"
	const good = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPL3axFGHI3db9iJWkPXVbYzD7OaWTtHuqmxLvj+DztB user@example"
	for _, c := range []struct {
		name, body, want string
	}{
		{"cloud-config", "  cloudInit:\n    userData: |\n      #cloud-config\n      ssh_authorized_keys: [\"" + good + "\", \"" + joined + "\"]\n",
			"spec.cloudInit.userData: ssh_authorized_keys[1]: not an SSH public key"},
		{"cloud-config users", "  cloudInit:\n    userData: |\n      #cloud-config\n      users:\n      - default\n      - name: ann\n        ssh_authorized_keys: [\"" + joined + "\"]\n",
			"spec.cloudInit.userData: users[1].ssh_authorized_keys[0]: not an SSH public key"},
		{"ignition", "  ignition:\n    config: '{\"ignition\": {\"version\": \"3.2.0\"}, \"passwd\": {\"users\": [{\"name\": \"core\", \"sshAuthorizedKeys\": [\"" + joined + "\"]}]}}'\n",
			"spec.ignition.config: passwd.users[0].sshAuthorizedKeys[0]: not an SSH public key"},
		{"butane", "  ignition:\n    butane: |\n      variant: fcos\n      version: 1.4.0\n      passwd:\n        users:\n        - name: core\n          ssh_authorized_keys: [\"" + joined + "\"]\n",
			"spec.ignition.butane: passwd.users[0].ssh_authorized_keys[0]: not an SSH public key"},
	} {
		r := render.Instance(parse(t, c.body), render.Target{})
		if r.OK() || !strings.Contains(r.Errors.Error(), c.want) || !strings.Contains(r.Errors.Error(), "no space between the key type") {
			t.Errorf("%s: errors %v; want %q", c.name, r.Errors, c.want)
		}
	}
	// What only looks odd: a DSA key, in the spec and in a cloud-config.
	const dsa = "ssh-dss AAAAB3NzaC1kc3MAAACBAP1/U4EddRIpUt9KnC7s5Of2EbdSPO9EAMMeP4C2USZpRV1AIlH7WT2NWPq/xfW6MPbLm1Vs14E7gB00b/JmYLdrmVClpJ+f6AR7ECLCT7up1/63xhv4O1fnxqimFQ8E+4P208UewwI1VBNaFpEy9nXzrith1yrv8iIDGZ3RSAHHAAAAFQCXYFCPFSMLzLKSuYKi64QL8Fgc9QAAAIEA9+GghdabPd7LvKtcNrhXuXmUr7v6OuqC+VdMCz0HgmdRWVeOutRZT+ZxBxCBgLRJFnEj6EwoFhO3zwkyjMim4TwWeotUfI0o4KOuHiuzpnWRbqN/C/ohNWLx+2J6ASQ7zKTxvqhRkImog9/hWuWfBpKLZl6Ae1UlZAFMO/7PSSoAAACBAPXHsA7gkQwB05jeGFQvMJmyACu1jkAZtfyiXoZXnBKVHzV34jZWZAGMQAoIs7LfTpfh2vG91tXK0yXxf2nbG3H/ouUOY3n+5UuiO/wyf5plx01AitGcXU9YUoGmx+Jb63i3NLzibI0HbQo3pb8ocIfBMqqwOrmpbwAl0i4IjU/X user@host"
	r := render.Instance(parse(t, "  sshAuthorizedKeys: [\""+dsa+"\"]\n  cloudInit:\n    userData: |\n      #cloud-config\n      ssh_authorized_keys: [\""+dsa+"\"]\n"), render.Target{})
	if !r.OK() || len(r.Warnings) != 2 || !strings.Contains(r.Warnings.Error(), "spec.sshAuthorizedKeys[0]: a DSA") || !strings.Contains(r.Warnings.Error(), "spec.cloudInit.userData: ssh_authorized_keys[0]: a DSA") {
		t.Errorf("a DSA key: errors %v, warnings %v; want a warning for each", r.Errors, r.Warnings)
	}
	if r := render.Instance(parse(t, "  sshAuthorizedKeys: [\""+dsa+"\"]\n"), render.Target{Strict: true}); r.OK() {
		t.Error("--strict: a DSA key's warning is no error")
	}
}

// TestDefaultUserKeysFromBothAgents: the default user's keys from a file
// reach the default user on both agents: cloud-init's meta-data
// public-keys, Ignition's core user.
func TestDefaultUserKeysFromBothAgents(t *testing.T) {
	const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPL3axFGHI3db9iJWkPXVbYzD7OaWTtHuqmxLvj+DztB user@example"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "keys"), []byte("# the team\n"+key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, agent := range []string{spec.AgentCloudInit, spec.AgentIgnition} {
		p := filepath.Join(dir, agent+".yaml")
		doc := "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: vm}\nspec:\n  agent: " + agent + "\n  sshAuthorizedKeysFrom: {file: keys}\n"
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		inst, err := spec.Load(p)
		if err != nil {
			t.Fatalf("%s: %v", agent, err)
		}
		r := render.Instance(inst, render.Target{})
		if !r.OK() {
			t.Fatalf("%s: %v", agent, r.Errors)
		}
		var out string
		if agent == spec.AgentIgnition {
			out = string(r.Ignition.Config)
		} else {
			md, _ := r.Seed.Lookup("meta-data")
			out = string(md)
		}
		if !strings.Contains(out, key) {
			t.Errorf("%s: the key is not delivered:\n%s", agent, out)
		}
	}
}
