// Package cloudconfig reads a #cloud-config document into vminit's
// instance spec, so that what users already write for cloud-init can be
// rendered for Ignition (or checked, or rebuilt as a seed) with the same
// meaning. Every key it cannot carry over is reported by name: nothing is
// dropped silently.
package cloudconfig

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/internal/lib/gzipbound"
	"github.com/vminit/vminit/spec"
)

// Target is what the converted document is for; it decides what happens
// to the parts of cloud-init's data the spec has no field for.
type Target int

const (
	// ForIgnition: the spec will be rendered for Ignition, which runs no
	// cloud-init, so every key without an equivalent is an error (a
	// warning with AllowPartial).
	ForIgnition Target = iota
	// ForSpec: the spec is the result. Keys without a spec field, and
	// user data that is not #cloud-config (#include, boothooks, MIME),
	// are kept as they are in spec.cloudInit.userData, which cloud-init
	// guests receive merged with what the spec generates: nothing is lost.
	ForSpec
)

// Options tune ToSpec.
type Options struct {
	// Name is the instance's metadata.name when the document has no
	// hostname; default "instance".
	Name string
	// For is what the spec is for (ForIgnition by default).
	For Target
	// AllowPartial reports keys that cannot be carried over as warnings
	// instead of errors.
	AllowPartial bool
}

// MaxSize bounds the input, like cloud-init's own user-data limit, and
// each decoded write_files content.
const MaxSize = 16 << 20

// ScriptPath is where a user-data script (#!) goes on the guest; a
// first-boot command runs it, as cloud-init's scripts-user module would.
const ScriptPath = "/var/lib/vminit/user-data-script"

// ToSpec reads user data: a #cloud-config document, or a #! script (run
// once on first boot through a command). It returns the instance
// (defaulted and validated), warnings, and, unless AllowPartial, an error
// listing every key it could not carry over with its path
// (write_files[2].encoding).
func ToSpec(data []byte, opts Options) (*spec.Instance, []string, error) {
	if len(data) > MaxSize {
		return nil, nil, fmt.Errorf("user data is %d bytes; the limit is %d", len(data), MaxSize)
	}
	c := &converter{opts: opts}
	c.inst = &spec.Instance{APIVersion: spec.APIVersion, Kind: spec.Kind}
	t := bytes.TrimLeft(data, " \t\r\n")
	lower := bytes.ToLower(t)
	switch {
	case bytes.HasPrefix(t, []byte("#!")):
		script := string(data)
		mode := spec.Mode(0o700)
		c.inst.Spec.Files = []spec.File{{Path: ScriptPath, Mode: &mode, Content: &script}}
		c.inst.Spec.Commands = []spec.Command{{Argv: []string{ScriptPath}}}
	case bytes.HasPrefix(lower, []byte("#cloud-config")) && !bytes.HasPrefix(lower, []byte("#cloud-config-")):
		// Read as cloud-init reads it: anchors, aliases and merge keys
		// resolved (the kept keys are written back without them, and
		// must mean the same), the expansion bounded.
		doc, err := cloudinit.LoadCloudConfig(data)
		if err != nil {
			return nil, nil, fmt.Errorf("#cloud-config %w", err)
		}
		c.doc = doc
		c.convert()
	case opts.For == ForSpec:
		// #include, boothooks, archives, MIME: cloud-init's own business.
		c.inst.Spec.CloudInit.UserData = string(data)
		c.warnings = append(c.warnings, "not #cloud-config: kept whole as spec.cloudInit.userData, which cloud-init guests receive as it is")
	default:
		first, _, _ := bytes.Cut(t, []byte("\n"))
		return nil, nil, fmt.Errorf("not a #cloud-config document or a #! script (it starts %q): #include, boothooks, archives and MIME have no Ignition equivalent", first)
	}
	name := opts.Name
	if name == "" {
		name = "instance"
	}
	if c.inst.Spec.Hostname != "" {
		name = c.inst.Spec.Hostname
	}
	c.inst.Metadata.Name = name
	if len(c.kept) > 0 {
		out, err := yaml.Marshal(&yaml.Node{Kind: yaml.MappingNode, Content: c.kept})
		if err != nil {
			return nil, c.warnings, err
		}
		c.inst.Spec.CloudInit.UserData = "#cloud-config\n" + string(out)
	}
	// Content is inline, so this only fills File.Data.
	c.inst.Resolve(".")
	if err := c.errs.Err(); err != nil {
		return nil, c.warnings, err
	}
	c.inst.Default()
	if err := c.inst.Validate(); err != nil {
		return nil, c.warnings, err
	}
	return c.inst, c.warnings, nil
}

type converter struct {
	doc      *yaml.Node // the document's mapping
	opts     Options
	inst     *spec.Instance
	errs     spec.ErrorList
	warnings []string
	// unsupported counts the reports of keys that cannot be carried over.
	unsupportedN int
	// kept are the key and value nodes carried over as cloud-config
	// (ForSpec).
	kept []*yaml.Node
}

// unsupported reports a key that cannot be carried over.
func (c *converter) unsupported(field, why string) {
	c.unsupportedN++
	if c.opts.AllowPartial {
		c.warnings = append(c.warnings, field+": "+why)
		return
	}
	c.errs.Add(field, "%s (--allow-partial drops it with a warning)", why)
}

// handlers convert one top-level key each; keys without a handler are
// reported as unsupported.
var handlers = map[string]func(c *converter, key string, n *yaml.Node){
	"hostname":                  func(c *converter, k string, n *yaml.Node) { c.str(k, n, &c.inst.Spec.Hostname) },
	"fqdn":                      func(c *converter, k string, n *yaml.Node) { c.str(k, n, &c.inst.Spec.FQDN) },
	"timezone":                  func(c *converter, k string, n *yaml.Node) { c.str(k, n, &c.inst.Spec.Timezone) },
	"ssh_authorized_keys":       func(c *converter, k string, n *yaml.Node) { c.strs(k, n, &c.inst.Spec.SSHAuthorizedKeys) },
	"users":                     (*converter).users,
	"write_files":               (*converter).writeFiles,
	"runcmd":                    func(c *converter, k string, n *yaml.Node) { c.commands(k, n, &c.inst.Spec.Commands) },
	"bootcmd":                   func(c *converter, k string, n *yaml.Node) { c.commands(k, n, &c.inst.Spec.BootCommands) },
	"mounts":                    (*converter).mounts,
	"ssh_pwauth":                (*converter).sshPwauth,
	"packages":                  func(c *converter, k string, n *yaml.Node) { c.strs(k, n, &c.inst.Spec.Packages) },
	"prefer_fqdn_over_hostname": (*converter).preferFQDN,
	// Keys that only steer cloud-init itself, with no effect on the guest
	// that Ignition would need to reproduce.
	"manage_etc_hosts": func(c *converter, k string, n *yaml.Node) {
		c.warnings = append(c.warnings, k+": /etc/hosts is left as the image has it")
	},
	"merge_how":  func(*converter, string, *yaml.Node) {},
	"merge_type": func(*converter, string, *yaml.Node) {},
}

func (c *converter) convert() {
	if c.doc == nil {
		return
	}
	// Keys in sorted order, a repeated key's last value winning as in
	// PyYAML: the same document always gives the same spec.
	last := map[string]int{}
	for i := 0; i+1 < len(c.doc.Content); i += 2 {
		last[c.doc.Content[i].Value] = i
	}
	for _, k := range slices.Sorted(maps.Keys(last)) {
		key, n := c.doc.Content[last[k]], c.doc.Content[last[k]+1]
		h, ok := handlers[k]
		if c.opts.For == ForSpec {
			// A key the spec cannot say whole stays cloud-config.
			if !ok || !c.tryKey(k, n, h) {
				c.kept = append(c.kept, key, n)
			}
			continue
		}
		if !ok {
			c.unsupported(k, "no Ignition equivalent is known for this cloud-init module key")
			continue
		}
		h(c, k, n)
	}
}

// tryKey converts one key into the spec if it converts without a loss,
// and reports whether it did.
func (c *converter) tryKey(k string, n *yaml.Node, h func(*converter, string, *yaml.Node)) bool {
	trial := &converter{opts: Options{For: ForIgnition}, inst: &spec.Instance{}}
	h(trial, k, n)
	if trial.unsupportedN > 0 || trial.errs.Err() != nil {
		return false
	}
	s, t := &c.inst.Spec, &trial.inst.Spec
	for _, f := range []struct{ dst, src *string }{{&s.Hostname, &t.Hostname}, {&s.FQDN, &t.FQDN}, {&s.Timezone, &t.Timezone}} {
		if *f.src != "" {
			*f.dst = *f.src
		}
	}
	s.SSHAuthorizedKeys = append(s.SSHAuthorizedKeys, t.SSHAuthorizedKeys...)
	s.Users = append(s.Users, t.Users...)
	s.Files = append(s.Files, t.Files...)
	s.Commands = append(s.Commands, t.Commands...)
	s.BootCommands = append(s.BootCommands, t.BootCommands...)
	s.Mounts = append(s.Mounts, t.Mounts...)
	s.Packages = append(s.Packages, t.Packages...)
	c.warnings = append(c.warnings, trial.warnings...)
	return true
}

func (c *converter) str(field string, n *yaml.Node, dst *string) {
	if n.Kind != yaml.ScalarNode {
		c.errs.Add(field, "want a string")
		return
	}
	*dst = n.Value
}

func (c *converter) strs(field string, n *yaml.Node, dst *[]string) {
	switch n.Kind {
	case yaml.ScalarNode:
		// cloud-init accepts "a, b" for groups and similar lists.
		for _, s := range strings.Split(n.Value, ",") {
			if s = strings.TrimSpace(s); s != "" {
				*dst = append(*dst, s)
			}
		}
	case yaml.SequenceNode:
		for i, e := range n.Content {
			if e.Kind != yaml.ScalarNode {
				c.errs.Add(fmt.Sprintf("%s[%d]", field, i), "want a string")
				continue
			}
			*dst = append(*dst, e.Value)
		}
	default:
		c.errs.Add(field, "want a string or a list of strings")
	}
}

func boolValue(n *yaml.Node) (bool, bool) {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Decode(&b) != nil {
		return false, false
	}
	return b, true
}

// userKeys maps cloud-init's users-and-groups keys to what ToSpec does
// with them.
func (c *converter) users(field string, n *yaml.Node) {
	if n.Kind != yaml.SequenceNode {
		c.errs.Add(field, "want a list")
		return
	}
	for i, e := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		if e.Kind == yaml.ScalarNode {
			if e.Value == "default" {
				c.warnings = append(c.warnings, f+": the distribution's default user is core on Ignition guests; spec-level keys go there")
				continue
			}
			c.inst.Spec.Users = append(c.inst.Spec.Users, spec.User{Name: e.Value})
			continue
		}
		if e.Kind != yaml.MappingNode {
			c.errs.Add(f, "want a user name or a mapping")
			continue
		}
		var u spec.User
		for j := 0; j+1 < len(e.Content); j += 2 {
			k, v := e.Content[j].Value, e.Content[j+1]
			kf := f + "." + k
			switch k {
			case "name":
				c.str(kf, v, &u.Name)
			case "gecos":
				c.str(kf, v, &u.Gecos)
			case "primary_group":
				c.str(kf, v, &u.PrimaryGroup)
			case "groups":
				c.strs(kf, v, &u.Groups)
			case "shell":
				c.str(kf, v, &u.Shell)
			case "homedir":
				c.str(kf, v, &u.HomeDir)
			case "hashed_passwd", "passwd":
				// cloud-init's passwd is a hash too; a plain-text password
				// (plain_text_passwd) is refused like the spec's.
				c.str(kf, v, &u.PasswordHash)
			case "lock_passwd":
				b, ok := boolValue(v)
				if !ok {
					c.errs.Add(kf, "want true or false")
				}
				u.LockPassword = &b
			case "ssh_authorized_keys":
				c.strs(kf, v, &u.SSHAuthorizedKeys)
			case "system":
				u.System, _ = boolValue(v)
			case "sudo":
				var rules []string
				if b, ok := boolValue(v); ok && !b {
					continue // sudo: false
				}
				c.strs(kf, v, &rules)
				if len(rules) > 1 {
					c.unsupported(kf, "several sudo rules: the spec holds one per user")
				}
				if len(rules) > 0 {
					u.Sudo = rules[0]
				}
			case "plain_text_passwd":
				c.errs.Add(kf, "plain-text passwords are refused: give hashed_passwd (mkpasswd -m sha-512)")
			default:
				c.unsupported(kf, "this users key has no Ignition equivalent")
			}
		}
		c.inst.Spec.Users = append(c.inst.Spec.Users, u)
	}
}

func (c *converter) writeFiles(field string, n *yaml.Node) {
	if n.Kind != yaml.SequenceNode {
		c.errs.Add(field, "want a list")
		return
	}
	for i, e := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		var wf struct {
			Path, Content, Encoding, Owner string
			Permissions                    yaml.Node
			Append, Defer                  bool
			Source                         yaml.Node
		}
		if err := e.Decode(&wf); err != nil {
			c.errs.Add(f, "%v", err)
			continue
		}
		if !wf.Source.IsZero() {
			c.unsupported(f+".source", "files fetched from a URL at boot are not carried over")
			continue
		}
		data, err := decodeContent(wf.Content, wf.Encoding)
		if errors.Is(err, gzipbound.ErrTooLarge) {
			c.errs.Add(f+".content", "%v", err)
			continue
		}
		if err != nil {
			c.errs.Add(f+".encoding", "%v", err)
			continue
		}
		file := spec.File{Path: wf.Path, Owner: wf.Owner, Append: wf.Append, Content: &[]string{string(data)}[0]}
		if file.Owner == "root:root" {
			file.Owner = ""
		}
		if !wf.Permissions.IsZero() {
			m, err := permissions(&wf.Permissions)
			if err != nil {
				c.errs.Add(f+".permissions", "%v", err)
				continue
			}
			file.Mode = &m
		}
		// defer only orders cloud-init's modules; Ignition creates users
		// before it writes files anyway.
		c.inst.Spec.Files = append(c.inst.Spec.Files, file)
	}
}

// permissions reads write_files' permissions as cloud-init does
// (decode_perms): a string is octal ("0644", "644"); so is a YAML number
// written with a leading 0 (PyYAML reads 0644 as octal); a number without
// one is decimal (420 is 0644).
func permissions(n *yaml.Node) (spec.Mode, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, fmt.Errorf("want an octal string such as \"0644\"")
	}
	if n.Tag == "!!int" && !strings.HasPrefix(n.Value, "0") {
		var v int
		if err := n.Decode(&v); err != nil || v < 0 || v > 0o7777 {
			return 0, fmt.Errorf("%q is not a file mode", n.Value)
		}
		return spec.Mode(v), nil
	}
	return spec.ParseMode(n.Value)
}

// decodeContent undoes write_files' encodings (cc_write_files.py).
func decodeContent(content, encoding string) ([]byte, error) {
	switch strings.ToLower(encoding) {
	case "", "text/plain":
		return []byte(content), nil
	case "b64", "base64":
		return base64.StdEncoding.DecodeString(content)
	case "gz", "gzip":
		return gzipbound.Decompress([]byte(content), MaxSize)
	case "gz+base64", "gzip+base64", "gz+b64", "gzip+b64":
		raw, err := base64.StdEncoding.DecodeString(content)
		if err != nil {
			return nil, err
		}
		return gzipbound.Decompress(raw, MaxSize)
	}
	return nil, fmt.Errorf("unknown encoding %q (cloud-init knows b64, gz and gz+b64)", encoding)
}

func (c *converter) commands(field string, n *yaml.Node, dst *[]spec.Command) {
	if n.Kind != yaml.SequenceNode {
		c.errs.Add(field, "want a list of commands")
		return
	}
	for i, e := range n.Content {
		var cmd spec.Command
		switch e.Kind {
		case yaml.ScalarNode:
			cmd.Shell = e.Value
		case yaml.SequenceNode:
			if err := e.Decode(&cmd.Argv); err != nil {
				c.errs.Add(fmt.Sprintf("%s[%d]", field, i), "want a list of strings")
				continue
			}
		default:
			c.errs.Add(fmt.Sprintf("%s[%d]", field, i), "want a string or a list of strings")
			continue
		}
		*dst = append(*dst, cmd)
	}
}

// mounts reads cloud-init's fstab-like lists: [device, path, type,
// options, dump, pass], with cloud-init's defaults for missing fields.
func (c *converter) mounts(field string, n *yaml.Node) {
	if n.Kind != yaml.SequenceNode {
		c.errs.Add(field, "want a list")
		return
	}
	for i, e := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		var row []string
		if err := e.Decode(&row); err != nil || len(row) < 2 {
			c.errs.Add(f, "want [device, mount point, type, options, dump, pass]")
			continue
		}
		if row[1] == "none" || row[1] == "" {
			continue // cloud-init's way of removing a mount
		}
		// cloud-init's mount_default_fields fill what a row leaves out:
		// auto and defaults,nofail (its x-systemd.after=cloud-init.service
		// and _netdev order against cloud-init, which an Ignition guest
		// does not run).
		m := spec.Mount{Device: row[0], Path: row[1], Type: "auto", Options: []string{"defaults", "nofail"}}
		if len(row) > 2 && row[2] != "" {
			m.Type = row[2]
		}
		if len(row) > 3 && row[3] != "" {
			m.Options = strings.Split(row[3], ",")
		}
		c.inst.Spec.Mounts = append(c.inst.Spec.Mounts, m)
	}
}

func (c *converter) sshPwauth(field string, n *yaml.Node) {
	b, ok := boolValue(n)
	if !ok {
		if n.Value == "unchanged" {
			return
		}
		c.errs.Add(field, "want true, false or unchanged")
		return
	}
	v := map[bool]string{true: "yes", false: "no"}[b]
	// What cc_set_passwords changes, as a drop-in sshd reads before its
	// main file's settings (Include at the top of sshd_config on Fedora
	// CoreOS and Flatcar).
	content := "# From cloud-config ssh_pwauth.\nPasswordAuthentication " + v + "\n"
	c.inst.Spec.Files = append(c.inst.Spec.Files, spec.File{Path: "/etc/ssh/sshd_config.d/40-vminit-ssh-pwauth.conf", Content: &content})
}

func (c *converter) preferFQDN(field string, n *yaml.Node) {
	if b, ok := boolValue(n); ok && b {
		c.unsupported(field, "the spec keeps the short name in /etc/hostname")
	}
}
