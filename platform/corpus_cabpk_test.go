package platform_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	//lint:ignore SA1019 the corpus holds v1beta1 objects, which CABPK converts as this test does.
	bootstrapv1beta1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/internal/testing/platformtest"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/convert"
)

// TestCorpusMatchesCABPK builds every Cluster API corpus object that
// builds (expect.txt's "builds" lines; a file whose objects have their own
// lines is compared through them) and compares what vminit delivers with
// what Cluster API's kubeadm bootstrap provider (CABPK, at the corpus'
// commit) would deliver for the same object, field by field. The
// expectation is derived here from the object with CABPK's mapping, as its
// cloudinit and ignition packages' templates write it, not with vminit's
// code:
//
//   - cloud-config: write_files (path, permissions, owner, append, and the
//     content as cloud-init's write_files decodes it), runcmd, bootcmd,
//     users (as cloud-init 22.4's ug_util normalizes them), ntp,
//     disk_setup, fs_setup and mounts, both documents read by cloud-init
//     22.4's own code;
//   - Ignition: files (mode, owner, content or source and hash, append),
//     links, units (contents, enablement, mask, drop-ins), users and
//     storage, with additionalConfig's Container Linux Config merged, as
//     CABPK's Ignition delivers them, against vminit's rendered config,
//     which the real ignition-validate checks;
//   - both: the kubeadm configuration's path and documents, and the
//     kubeadm command.
//
// The differences vminit makes on purpose are in cabpkDifferences, each
// with its reason; identity (host name, instance id) is CABPK's caller's,
// not CABPK's, and is not compared.
func TestCorpusMatchesCABPK(t *testing.T) {
	cloudinittest.Require(t)
	objs := cabpkCorpusObjects(t)
	// cloud-init's code reads every cloud-config object in one run.
	in := map[string]map[string]string{}
	for _, o := range objs {
		if o.cs.Format == bootstrapv1.Ignition {
			continue
		}
		ud, err := cloudinit.UserData(o.res.Instance)
		if err != nil {
			t.Fatalf("%s: %v", o.key, err)
		}
		in[o.key] = map[string]string{"vminit": string(ud), "cabpk": cabpkCloudConfig(t, o)}
	}
	var views map[string]map[string]cloudInitView
	cloudinittest.Run(t, cloudinittest.FinalConfig+cloudInitViewPy, in, &views)
	for _, o := range objs {
		t.Run(o.key, func(t *testing.T) {
			if o.cs.Format == bootstrapv1.Ignition {
				compareIgnition(t, o)
				return
			}
			compareCloudInit(t, o, views[o.key]["vminit"], views[o.key]["cabpk"])
		})
	}
}

// cabpkDifferences are what vminit delivers differently from CABPK on
// purpose, by what the comparison meets.
var cabpkDifferences = map[string]string{
	// cloud-config
	"final newline":  "CABPK puts a file's content in a YAML literal block, which ends it with exactly one newline; vminit writes the object's bytes as given (compared with the final newlines aside)",
	"header":         "CABPK writes '## template: jinja' before every document, so cloud-init evaluates every {{ in it; vminit keeps it only where the object uses Jinja (the test reads both as the template, Jinja unevaluated)",
	"kubeadm blanks": "CABPK's template leaves two blanks before && when verbosity is unset; vminit one",
	"hostname":       "CABPK leaves the host name to the infrastructure; vminit names the machine (--machine), which the comparison leaves out",
	"mounts":         "CABPK writes cloud-init's mounts, which cloud-init 22.4 drops for LABEL= and UUID= devices; vminit writes systemd mount units, enabled in runcmd before the commands",
	// Ignition
	"sudoers":      "CABPK writes /etc/sudoers.d/NAME 0600; vminit /etc/sudoers.d/vminit-NAME 0440 (sudo's own mode; the prefix names its origin and sorts it last), with the same rule",
	"bootCommands": "CABPK's Ignition drops bootCommands; vminit runs them from vminit-boot.service, as in cloud-config",
}

// cabpkObject is one corpus object, as vminit builds it and as CABPK reads
// it.
type cabpkObject struct {
	key  string
	res  *platform.Result
	cs   bootstrapv1.KubeadmConfigSpec
	join bool // CABPK joins: a template's machines always, a KubeadmConfig without init or cluster configuration
}

func cabpkCorpusObjects(t *testing.T) []cabpkObject {
	dir := filepath.Join("testdata", "corpus", "capi")
	vars, err := readVarsEnv(filepath.Join(dir, "vars.env"))
	if err != nil {
		t.Fatal(err)
	}
	var objs []cabpkObject
	for _, key := range cabpkBuildingKeys(t, filepath.Join(dir, "expect.txt")) {
		file, object, _ := strings.Cut(key, "#")
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if data, err = clusterctlSubst(data, vars); err != nil {
			t.Fatal(err)
		}
		opts := capiCorpusOpts
		opts.Object = object
		rs, err := convert.Read(t.Context(), file, data, opts)
		if err != nil || len(rs) != 1 {
			t.Errorf("%s: expect.txt says it builds: %d results, %v", key, len(rs), err)
			continue
		}
		o := cabpkObject{key: key, res: rs[0]}
		o.cs, o.join = cabpkSpec(t, file, data, object)
		objs = append(objs, o)
	}
	return objs
}

// cabpkBuildingKeys are expect.txt's keys that build, without the files
// whose objects have lines of their own.
func cabpkBuildingKeys(t *testing.T, path string) []string {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	hasObjects := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		key, rest, _ := strings.Cut(sc.Text(), " ")
		if strings.HasPrefix(key, "#") || !strings.HasPrefix(rest, "builds:") {
			continue
		}
		if file, _, ok := strings.Cut(key, "#"); ok {
			hasObjects[file] = true
		}
		keys = append(keys, key)
	}
	return slices.DeleteFunc(keys, func(k string) bool { return hasObjects[k] })
}

// cabpkKinds are the objects holding a KubeadmConfig spec, and where.
var cabpkKinds = map[string][]string{
	"KubeadmConfig":               {"spec"},
	"KubeadmConfigTemplate":       {"spec", "template", "spec"},
	"KubeadmControlPlane":         {"spec", "kubeadmConfigSpec"},
	"KubeadmControlPlaneTemplate": {"spec", "template", "spec", "kubeadmConfigSpec"},
}

// cabpkSpec decodes the object's KubeadmConfig spec as CABPK holds it
// (v1beta1 converted by Cluster API's conversion), and whether CABPK
// joins with it: a template's machines always join (a MachineDeployment's
// or MachinePool's), a control plane's first machine inits (the one
// vminit builds without --pool-index), a KubeadmConfig inits when it has
// an init or cluster configuration, or, empty, when the Machine beside it
// is a control-plane machine.
func cabpkSpec(t *testing.T, file string, data []byte, object string) (bootstrapv1.KubeadmConfigSpec, bool) {
	docs, err := platform.Split(file, data)
	if err != nil {
		t.Fatal(err)
	}
	kind, name, _ := strings.Cut(object, "/")
	for _, d := range docs {
		at, ok := cabpkKinds[d.Kind]
		if !ok || object != "" && (d.Kind != kind || d.Name != name) {
			continue
		}
		var v any
		must(t, json.Unmarshal(d.JSON, &v))
		for _, k := range at {
			m, _ := v.(map[string]any) // nil for an empty spec
			v = m[k]
		}
		raw, err := json.Marshal(v)
		must(t, err)
		var cs bootstrapv1.KubeadmConfigSpec
		if strings.HasSuffix(d.APIVersion, "/v1beta1") {
			var old bootstrapv1beta1.KubeadmConfigSpec
			must(t, json.Unmarshal(raw, &old))
			must(t, bootstrapv1beta1.Convert_v1beta1_KubeadmConfigSpec_To_v1beta2_KubeadmConfigSpec(&old, &cs, nil))
		} else {
			must(t, json.Unmarshal(raw, &cs))
		}
		switch d.Kind {
		case "KubeadmConfigTemplate":
			return cs, true
		case "KubeadmControlPlane", "KubeadmControlPlaneTemplate":
			return cs, false
		}
		initMode := !reflect.ValueOf(cs.InitConfiguration).IsZero() || !reflect.ValueOf(cs.ClusterConfiguration).IsZero()
		if !initMode && reflect.ValueOf(cs.JoinConfiguration).IsZero() {
			// An empty one is what its Machine is: CABPK inits the first
			// control-plane Machine (handleClusterNotInitialized) and
			// joins a worker.
			for _, m := range docs {
				if mm, ok := platform.ReadMachine(m.JSON); ok && mm.Config == d.Name {
					return cs, !mm.ControlPlane
				}
			}
		}
		return cs, !initMode
	}
	t.Fatalf("%s: no KubeadmConfig spec %s", file, object)
	return bootstrapv1.KubeadmConfigSpec{}, false
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Where CABPK writes kubeadm's configuration, and its commands.
const (
	cabpkInitConfig = "/run/kubeadm/kubeadm.yaml"
	cabpkJoinConfig = "/run/kubeadm/kubeadm-join-config.yaml"
	cabpkIgnConfig  = "/etc/kubeadm.yml"
	cabpkSentinel   = "echo success > /run/cluster-api/bootstrap-success.complete"
	cabpkHolderText = "This placeholder file is used to create the /run/cluster-api sub directory in a way that is compatible with both Linux and Windows (mkdir -p /run/cluster-api does not work with Windows)"
)

// plainFile reports whether the object's files write path with content
// given as text (no encoding).
func (o cabpkObject) plainFile(path string) bool {
	return slices.ContainsFunc(o.cs.Files, func(f bootstrapv1.File) bool { return f.Path == path && f.Encoding == "" })
}

func (o cabpkObject) verbosity() string {
	if o.cs.Verbosity != nil {
		return fmt.Sprintf("--v %d", *o.cs.Verbosity)
	}
	return ""
}

// cabpkCloudConfig is the cloud-config CABPK's cloudinit package writes
// for o (its node or control-plane init template), its header aside. The
// kubeadm configuration's content is the controller's (compared by
// compareKubeadmConfig); the init certificates it adds come from the
// cluster.
func cabpkCloudConfig(t *testing.T, o cabpkObject) string {
	cs := o.cs
	var files []any
	for _, f := range cs.Files {
		if f.ContentFrom.Secret.Name != "" {
			t.Fatalf("%s: contentFrom: the Secret CABPK reads is not in the corpus", o.key)
		}
		e := map[string]any{"path": f.Path, "content": blockClip(f.Content)}
		setIf(e, "encoding", string(f.Encoding))
		setIf(e, "owner", f.Owner)
		setIf(e, "permissions", f.Permissions)
		if f.Append != nil && *f.Append {
			e["append"] = true
		}
		files = append(files, e)
	}
	cfgPath, cmd := cabpkInitConfig, "kubeadm init --config "+cabpkInitConfig+" "+o.verbosity()
	if o.join {
		cfgPath, cmd = cabpkJoinConfig, "kubeadm join --config "+cabpkJoinConfig+" "+o.verbosity()
	}
	files = append(files,
		map[string]any{"path": cfgPath, "owner": "root:root", "permissions": "0640", "content": "---\n"},
		map[string]any{"path": "/run/cluster-api/placeholder", "owner": "root:root", "permissions": "0640", "content": cabpkHolderText})
	cfg := map[string]any{"write_files": files}
	runcmd := append([]any{}, toAny(cs.PreKubeadmCommands)...)
	runcmd = append(runcmd, cmd+" && "+cabpkSentinel)
	cfg["runcmd"] = append(runcmd, toAny(cs.PostKubeadmCommands)...)
	if len(cs.BootCommands) > 0 {
		cfg["bootcmd"] = toAny(cs.BootCommands)
	}
	if n := cs.NTP; len(n.Servers) > 0 || n.Enabled != nil {
		ntp := map[string]any{"servers": toAny(n.Servers)}
		if n.Enabled != nil && *n.Enabled {
			ntp["enabled"] = true
		}
		cfg["ntp"] = ntp
	}
	if len(cs.Users) > 0 {
		cfg["users"] = cabpkUsers(cs.Users)
	}
	cabpkDiskSetup(cs.DiskSetup, cfg)
	out, err := yaml.Marshal(cfg)
	must(t, err)
	return "#cloud-config\n" + string(out)
}

// cabpkUsers are users as CABPK's template writes them: each field when
// set (groups as the comma-separated string given).
func cabpkUsers(users []bootstrapv1.User) []any {
	var out []any
	for _, u := range users {
		e := map[string]any{"name": u.Name}
		setIf(e, "passwd", u.Passwd)
		setIf(e, "gecos", u.Gecos)
		setIf(e, "groups", u.Groups)
		setIf(e, "homedir", u.HomeDir)
		setIf(e, "shell", u.Shell)
		setIf(e, "primary_group", u.PrimaryGroup)
		setIf(e, "sudo", u.Sudo)
		if u.Inactive != nil && *u.Inactive {
			e["inactive"] = true
		}
		if u.LockPassword != nil {
			e["lock_passwd"] = *u.LockPassword
		}
		if len(u.SSHAuthorizedKeys) > 0 {
			e["ssh_authorized_keys"] = toAny(u.SSHAuthorizedKeys)
		}
		out = append(out, e)
	}
	return out
}

// cabpkDiskSetup adds disk_setup, fs_setup as CABPK's templates write
// them (mounts are compared apart: cabpkDifferences["mounts"]).
func cabpkDiskSetup(ds bootstrapv1.DiskSetup, cfg map[string]any) {
	cloudInitType := map[string]string{"Linux": "83", "LinuxSwap": "82", "LinuxRAID": "fd", "LVM": "8e", "Fat32": "0c", "NTFS": "07", "LinuxExtended": "85"}
	if len(ds.Partitions) > 0 {
		setup := map[string]any{}
		for _, p := range ds.Partitions {
			e := map[string]any{}
			setIf(e, "table_type", p.TableType)
			if len(p.DiskLayout) > 0 {
				var layout []any
				for _, l := range p.DiskLayout {
					if l.PartitionType != "" {
						layout = append(layout, []any{l.Percentage, cloudInitType[l.PartitionType]})
					} else {
						layout = append(layout, l.Percentage)
					}
				}
				e["layout"] = layout
			} else if p.Layout != nil {
				e["layout"] = *p.Layout
			}
			if p.Overwrite != nil && *p.Overwrite {
				e["overwrite"] = true
			}
			setup[p.Device] = e
		}
		cfg["disk_setup"] = setup
	}
	var fs []any
	for _, f := range ds.Filesystems {
		e := map[string]any{"label": f.Label, "filesystem": f.Filesystem, "device": f.Device}
		setIf(e, "partition", f.Partition)
		setIf(e, "replace_fs", f.ReplaceFS)
		if f.Overwrite != nil && *f.Overwrite {
			e["overwrite"] = true
		}
		if len(f.ExtraOpts) > 0 {
			e["extra_opts"] = toAny(f.ExtraOpts)
		}
		fs = append(fs, e)
	}
	if fs != nil {
		cfg["fs_setup"] = fs
	}
}

func setIf(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// blockClip is text as a YAML literal block with clip chomping, which
// CABPK's templates put content in, delivers it: one final newline.
func blockClip(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	return s + "\n"
}

// cloudInitView is what cloud-init 22.4 makes of one user data.
type cloudInitView struct {
	Config map[string]any            `json:"config"`
	Files  []ciFile                  `json:"files"`
	Users  map[string]map[string]any `json:"users"`
}

// ciFile is a write_files entry as cloud-init's write_files writes it.
type ciFile struct {
	Path    string `json:"path"`
	Content []byte `json:"content"`
	Perms   int    `json:"perms"`
	Owner   string `json:"owner"`
	Append  bool   `json:"append"`
}

// cloudInitViewPy reads {KEY: {SIDE: user data}} with cloud-init's code:
// the final config, write_files' decoding of each file, and ug_util's
// users on an image whose default user is ubuntu.
const cloudInitViewPy = `
import json, sys
from cloudinit.config import cc_write_files as wf
from cloudinit.distros import ug_util

class Distro:
    def get_default_user(self):
        return {"name": "ubuntu", "lock_passwd": True, "groups": ["adm", "sudo"]}

def view(ud):
    # The Jinja header makes cloud-init render the document at boot, with
    # the instance's data: both are compared as the template they are.
    if ud.startswith("## template: jinja\n"):
        ud = ud[len("## template: jinja\n"):]
    cfg, _ = final_config(ud.encode())
    files = []
    for f in cfg.get("write_files") or []:
        data = wf.extract_contents(f.get("content", ""), wf.canonicalize_extraction(f.get("encoding")))
        if isinstance(data, str):
            data = data.encode()
        files.append({"path": f["path"], "content": b64(data), "perms": wf.decode_perms(f.get("permissions"), 0o644),
                      "owner": f.get("owner", "root:root"), "append": bool(f.get("append", False))})
    users, _ = ug_util.normalize_users_groups(cfg, Distro())
    return {"config": cfg, "files": files, "users": users}

inp = json.load(sys.stdin)
json.dump({k: {side: view(ud) for side, ud in v.items()} for k, v in inp.items()}, sys.stdout, default=str)
`

func compareCloudInit(t *testing.T, o cabpkObject, vm, want cloudInitView) {
	mounts := len(o.cs.Mounts) > 0
	got := map[string]string{}
	for _, f := range vm.Files {
		if mounts && strings.HasSuffix(f.Path, ".mount") {
			continue // cabpkDifferences["mounts"], checked below
		}
		got[f.Path] = fmt.Sprintf("%04o %s append=%v", f.Perms, f.Owner, f.Append)
		if f.Path == cabpkInitConfig || f.Path == cabpkJoinConfig {
			compareKubeadmConfig(t, o, f.Path, f.Content)
			continue
		}
		content := string(f.Content)
		if o.plainFile(f.Path) {
			content = blockClip(content) // cabpkDifferences["final newline"]
		}
		got[f.Path] += " " + content
	}
	exp := map[string]string{}
	for _, f := range want.Files {
		exp[f.Path] = fmt.Sprintf("%04o %s append=%v", f.Perms, f.Owner, f.Append)
		if f.Path != cabpkInitConfig && f.Path != cabpkJoinConfig {
			exp[f.Path] += " " + string(f.Content)
		}
	}
	platformtest.Eq(t, "write_files", got, exp)

	runcmd, _ := vm.Config["runcmd"].([]any)
	if mounts {
		// cabpkDifferences["mounts"]: the units, enabled first.
		for _, m := range o.cs.Mounts {
			if len(m) > 1 && !slices.ContainsFunc(vm.Files, func(f ciFile) bool {
				return strings.HasSuffix(f.Path, ".mount") && strings.Contains(string(f.Content), "\nWhere="+m[1]+"\n")
			}) {
				t.Errorf("mount %v: no mount unit", m)
			}
		}
		runcmd = slices.DeleteFunc(slices.Clone(runcmd), func(c any) bool { s, _ := c.(string); return strings.HasPrefix(s, "systemctl ") })
	}
	platformtest.Eq(t, "runcmd", kubeadmBlanks(runcmd), kubeadmBlanks(want.Config["runcmd"].([]any)))
	for _, k := range []string{"bootcmd", "ntp", "disk_setup", "fs_setup"} {
		platformtest.Eq(t, k, vm.Config[k], want.Config[k])
	}
	if _, ok := vm.Config["mounts"]; ok {
		t.Error("cloud-init mounts: vminit writes systemd mount units")
	}
	platformtest.Eq(t, "users", normalUsers(vm.Users), normalUsers(want.Users))
	for k := range vm.Config {
		if _, ok := want.Config[k]; !ok && k != "hostname" && k != "fqdn" {
			t.Errorf("%s: a key CABPK does not write", k)
		}
	}
}

// kubeadmBlanks collapses the blanks of the kubeadm command
// (cabpkDifferences["kubeadm blanks"]).
func kubeadmBlanks(cmds []any) []any {
	out := slices.Clone(cmds)
	for i, c := range out {
		if s, ok := c.(string); ok && strings.HasPrefix(s, "kubeadm ") {
			out[i] = strings.Join(strings.Fields(s), " ")
		}
	}
	return out
}

// normalUsers are cloud-init's users as it creates them: groups split at
// commas, lock_passwd true unless false.
func normalUsers(users map[string]map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for name, u := range users {
		n := map[string]any{"lock_passwd": true}
		for k, v := range u {
			switch k {
			case "default":
			case "groups":
				if s, ok := v.(string); ok {
					var gs []any
					for _, g := range strings.Split(s, ",") {
						gs = append(gs, strings.TrimSpace(g))
					}
					v = gs
				}
				n[k] = v
			default:
				n[k] = v
			}
		}
		out[name] = n
	}
	return out
}

// compareKubeadmConfig checks the kubeadm configuration vminit writes at
// path: CABPK's path for o's mode, kubeadm's v1beta4 API (what CABPK
// writes for Kubernetes 1.31 and later), the kinds CABPK writes, and every
// field the object sets in them.
func compareKubeadmConfig(t *testing.T, o cabpkObject, path string, content []byte) {
	t.Helper()
	want := map[string]any{"JoinConfiguration": o.cs.JoinConfiguration}
	wantPath := cabpkJoinConfig
	if !o.join {
		want = map[string]any{"ClusterConfiguration": o.cs.ClusterConfiguration, "InitConfiguration": o.cs.InitConfiguration}
		wantPath = cabpkInitConfig
	}
	if o.cs.Format == bootstrapv1.Ignition {
		wantPath = cabpkIgnConfig
	}
	platformtest.Eq(t, "kubeadm configuration path", path, wantPath)
	dec := yaml.NewDecoder(bytes.NewReader(content))
	got := map[string]map[string]any{}
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if doc == nil {
			continue
		}
		platformtest.Eq(t, "kubeadm apiVersion", doc["apiVersion"], any("kubeadm.k8s.io/v1beta4"))
		got[fmt.Sprint(doc["kind"])] = jsonRound(t, doc)
	}
	for kind, v := range want {
		doc, ok := got[kind]
		if !ok {
			t.Errorf("%s: no %s (has %v)", path, kind, slices.Sorted(maps.Keys(got)))
			continue
		}
		for k, fv := range jsonRound(t, v) {
			if strings.HasSuffix(k, "Days") {
				continue // kubeadm's durations, CABPK's days
			}
			if m, ok := fv.(map[string]any); ok && len(m) == 0 {
				continue // unset in the object
			}
			platformtest.Eq(t, kind+"."+k, doc[k], fv)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: kinds %v, want %d", path, slices.Sorted(maps.Keys(got)), len(want))
	}
}

func jsonRound(t *testing.T, v any) map[string]any {
	raw, err := json.Marshal(v)
	must(t, err)
	m := map[string]any{}
	must(t, json.Unmarshal(raw, &m))
	return m
}

// igState is what an Ignition config leaves on the guest, as far as CABPK
// defines it.
type igState struct {
	Files map[string]string // path: mode, owner, content or source and hash, appended
	Links map[string]string
	Units map[string]igUnit
	Users map[string]string // name: the fields set
	// Storage is the disks (their devices) and file systems (format and
	// label) set up.
	Storage []string
}

func compareIgnition(t *testing.T, o cabpkObject) {
	res, err := ignition.Render(o.res.Instance, ignition.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The config as Ignition itself checks it.
	path := filepath.Join(t.TempDir(), "config.ign")
	must(t, os.WriteFile(path, res.Config, 0o600))
	if out, err := exec.Command(testtools.Require(t, "ignition-validate"), path).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("ignition-validate: %v\n%s", err, out)
	}
	got := vminitIgnition(t, res.Config, o)
	want := cabpkIgnition(t, o)
	platformtest.Eq(t, "files", got.Files, want.Files)
	platformtest.Eq(t, "links", got.Links, want.Links)
	platformtest.Eq(t, "units", got.Units, want.Units)
	platformtest.Eq(t, "users", got.Users, want.Users)
	platformtest.Eq(t, "storage", got.Storage, want.Storage)
}

// ign3 is the part of an Ignition 3 config the comparison reads.
type ign3 struct {
	Passwd struct {
		Users []struct {
			Name              string
			SSHAuthorizedKeys []string
			Groups            []string
			Gecos, HomeDir    string
			Shell             string
			PasswordHash      *string
			PrimaryGroup      string
		}
	}
	Storage struct {
		Files []struct {
			Path     string
			Mode     *int
			User     struct{ Name string }
			Group    struct{ Name string }
			Contents ign3Resource
			Append   []ign3Resource
		}
		Links []struct {
			Path, Target string
			Hard         *bool
		}
		Disks []struct {
			Device string
		}
		Filesystems []struct {
			Format, Label *string
		}
	}
	Systemd struct {
		Units []struct {
			Name     string
			Enabled  *bool
			Mask     *bool
			Contents *string
			Dropins  []struct {
				Name     string
				Contents *string
			}
		}
	}
}

type ign3Resource struct {
	Source       *string
	Compression  *string
	Verification struct{ Hash *string }
}

// data is a resource's text: a data URL decoded, else its source and hash.
func (r ign3Resource) data(t *testing.T) string {
	if r.Source == nil {
		return ""
	}
	src := *r.Source
	if !strings.HasPrefix(src, "data:") {
		h := ""
		if r.Verification.Hash != nil {
			h = " " + *r.Verification.Hash
		}
		return "source " + src + h
	}
	meta, payload, _ := strings.Cut(strings.TrimPrefix(src, "data:"), ",")
	var raw []byte
	if strings.HasSuffix(meta, ";base64") {
		b, err := base64.StdEncoding.DecodeString(payload)
		must(t, err)
		raw = b
	} else {
		s, err := url.PathUnescape(payload)
		must(t, err)
		raw = []byte(s)
	}
	if r.Compression != nil && *r.Compression == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		must(t, err)
		raw, err = io.ReadAll(zr)
		must(t, err)
	}
	return string(raw)
}

func vminitIgnition(t *testing.T, config []byte, o cabpkObject) igState {
	var c ign3
	must(t, json.Unmarshal(config, &c))
	s := igState{Files: map[string]string{}, Links: map[string]string{}, Units: map[string]igUnit{}, Users: map[string]string{}}
	for _, f := range c.Storage.Files {
		switch {
		case f.Path == "/etc/hostname":
			continue // cabpkDifferences["hostname"]
		case f.Path == cabpkIgnConfig:
			compareKubeadmConfig(t, o, f.Path, []byte(f.Contents.data(t)))
			f.Contents = ign3Resource{}
		case strings.HasPrefix(f.Path, "/etc/sudoers.d/vminit-"):
			// cabpkDifferences["sudoers"]
			if f.Mode == nil || *f.Mode != 0o440 {
				t.Errorf("%s: mode %v", f.Path, f.Mode)
			}
			f.Path = strings.Replace(f.Path, "vminit-", "", 1)
			m := 0o600
			f.Mode = &m
		}
		var app []string
		for _, a := range f.Append {
			app = append(app, a.data(t))
		}
		mode := 0o644 // Ignition's default, and CLC's
		if f.Mode != nil {
			mode = *f.Mode
		}
		content := f.Contents.data(t)
		if o.plainFile(f.Path) {
			content = blockClip(content) // cabpkDifferences["final newline"]
		}
		s.Files[f.Path] = igFile(mode, f.User.Name, f.Group.Name, content, app)
	}
	for _, l := range c.Storage.Links {
		s.Links[l.Path] = fmt.Sprintf("%s hard=%v", l.Target, l.Hard != nil && *l.Hard)
	}
	for _, u := range c.Systemd.Units {
		dropins := map[string]string{}
		for _, d := range u.Dropins {
			dropins[d.Name] = deref(d.Contents)
		}
		s.Units[u.Name] = igUnit{u.Enabled != nil && *u.Enabled, u.Mask != nil && *u.Mask, deref(u.Contents), dropins}
	}
	for _, d := range c.Storage.Disks {
		s.Storage = append(s.Storage, "disk "+d.Device)
	}
	for _, f := range c.Storage.Filesystems {
		s.Storage = append(s.Storage, "filesystem "+deref(f.Format)+" "+deref(f.Label))
	}
	for _, u := range c.Passwd.Users {
		s.Users[u.Name] = fmt.Sprintf("keys=%q groups=%q gecos=%q home=%q shell=%q hash=%q primary=%q",
			u.SSHAuthorizedKeys, u.Groups, u.Gecos, u.HomeDir, u.Shell, deref(u.PasswordHash), u.PrimaryGroup)
	}
	return s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func igFile(mode int, user, group, content string, appended []string) string {
	return fmt.Sprintf("%04o %s:%s %q append=%q", mode, user, group, content, appended)
}

// igUnit is a unit as the guest gets it.
type igUnit struct {
	Enabled, Mask bool
	Contents      string
	Dropins       map[string]string
}

// cabpkIgnition is what CABPK's Ignition (its clc package's template,
// then additionalConfig appended by Ignition 2's rules) leaves on the
// guest for o.
func cabpkIgnition(t *testing.T, o cabpkObject) igState {
	cs := o.cs
	s := igState{Files: map[string]string{}, Links: map[string]string{}, Units: map[string]igUnit{}, Users: map[string]string{}}
	for _, u := range cs.Users {
		var groups []string
		if u.Groups != "" {
			groups = strings.Split(u.Groups, ", ")
		}
		s.Users[u.Name] = fmt.Sprintf("keys=%q groups=%q gecos=%q home=%q shell=%q hash=%q primary=%q",
			u.SSHAuthorizedKeys, groups, u.Gecos, u.HomeDir, u.Shell, u.Passwd, u.PrimaryGroup)
		if u.Sudo != "" {
			s.Files["/etc/sudoers.d/"+u.Name] = igFile(0o600, "", "", u.Name+" "+u.Sudo+"\n", nil)
		}
	}
	for _, f := range cs.Files {
		mode := int64(0o644)
		if f.Permissions != "" {
			m, err := strconv.ParseInt(f.Permissions, 8, 32)
			must(t, err)
			mode = m
		}
		user, group, _ := strings.Cut(f.Owner, ":")
		content := blockClip(f.Content)
		if f.Encoding == bootstrapv1.Base64 {
			b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(f.Content))
			must(t, err)
			content = string(b)
		}
		s.Files[f.Path] = igFile(int(mode), strings.TrimSpace(user), strings.TrimSpace(group), content, nil)
	}
	sub := "init"
	if o.join {
		sub = "join"
	}
	var script strings.Builder
	script.WriteString("#!/bin/bash\nset -e\n\n")
	for _, c := range cs.PreKubeadmCommands {
		script.WriteString(c + "\n")
	}
	fmt.Fprintf(&script, "\nkubeadm %s --config /etc/kubeadm.yml %s\nmkdir -p /run/cluster-api && %s\nmv /etc/kubeadm.yml /tmp/\n", sub, o.verbosity(), cabpkSentinel)
	if len(cs.PostKubeadmCommands) > 0 {
		script.WriteString("\n")
	}
	for _, c := range cs.PostKubeadmCommands {
		script.WriteString(c + "\n")
	}
	s.Files["/etc/kubeadm.sh"] = igFile(0o700, "", "", script.String(), nil)
	s.Files[cabpkIgnConfig] = igFile(0o600, "", "", "", nil) // its content: compareKubeadmConfig
	s.Units["kubeadm.service"] = igUnit{Enabled: true, Contents: cabpkKubeadmUnit, Dropins: map[string]string{}}
	if len(cs.BootCommands) > 0 {
		t.Errorf("bootCommands: %s", cabpkDifferences["bootCommands"])
	}
	// CABPK's storage.filesystems name the diskSetup device without its
	// partition (vminit appends it, as cloud-init does): compared by
	// format and label.
	for _, p := range cs.DiskSetup.Partitions {
		s.Storage = append(s.Storage, "disk "+p.Device)
	}
	for _, f := range cs.DiskSetup.Filesystems {
		s.Storage = append(s.Storage, "filesystem "+f.Filesystem+" "+f.Label)
	}
	clcAppend(t, cs.Ignition.ContainerLinuxConfig.AdditionalConfig, &s)
	return s
}

// cabpkKubeadmUnit is CABPK's kubeadm.service.
const cabpkKubeadmUnit = "[Unit]\nDescription=kubeadm\n# Run only once. After successful run, this file is moved to /tmp/.\n" +
	"ConditionPathExists=/etc/kubeadm.yml\nAfter=network.target\n[Service]\n# To not restart the unit when it exits, as it is expected.\n" +
	"Type=oneshot\nExecStart=/bin/bash /etc/kubeadm.sh\n[Install]\nWantedBy=multi-user.target\n"

// clc is the part of a Container Linux Config the corpus uses.
type clc struct {
	Storage struct {
		Files []struct {
			Path     string
			Mode     *int
			User     struct{ Name string }
			Group    struct{ Name string }
			Append   bool
			Contents struct {
				Inline string
				Remote struct {
					URL          string `yaml:"url"`
					Verification struct {
						Hash struct{ Function, Sum string }
					}
				}
			}
		}
		Links []struct {
			Path, Target string
			Hard         bool
		}
	}
	Systemd struct {
		Units []struct {
			Name         string
			Enable, Mask bool
			Enabled      *bool
			Contents     string
			Dropins      []struct{ Name, Contents string }
		}
	}
}

// clcAppend applies a Container Linux Config after CABPK's own, as
// Ignition 2 applies an appended config: files and links by path (the
// last wins), units by name (contents replaced when given, drop-ins
// added, enablement as last set).
func clcAppend(t *testing.T, text string, s *igState) {
	if strings.TrimSpace(text) == "" {
		return
	}
	var c clc
	must(t, yaml.Unmarshal([]byte(text), &c))
	for _, f := range c.Storage.Files {
		mode := 0o644
		if f.Mode != nil {
			mode = *f.Mode
		}
		content := f.Contents.Inline
		if r := f.Contents.Remote; r.URL != "" {
			content = "source " + r.URL
			if r.Verification.Hash.Function != "" {
				content += " " + r.Verification.Hash.Function + "-" + r.Verification.Hash.Sum
			}
		}
		if f.Append {
			s.Files[f.Path] = igFile(mode, f.User.Name, f.Group.Name, "", []string{content})
			continue
		}
		s.Files[f.Path] = igFile(mode, f.User.Name, f.Group.Name, content, nil)
	}
	for _, l := range c.Storage.Links {
		s.Links[l.Path] = fmt.Sprintf("%s hard=%v", l.Target, l.Hard)
	}
	for _, u := range c.Systemd.Units {
		n, ok := s.Units[u.Name]
		if !ok {
			n.Dropins = map[string]string{}
		}
		switch {
		case u.Enabled != nil:
			n.Enabled = *u.Enabled
		case u.Enable:
			n.Enabled = true
		}
		n.Mask = n.Mask || u.Mask
		if u.Contents != "" {
			n.Contents = u.Contents
		}
		for _, d := range u.Dropins {
			n.Dropins[d.Name] = d.Contents
		}
		s.Units[u.Name] = n
	}
}
