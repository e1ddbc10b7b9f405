package ignition

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/vminit/vminit/internal/lib/systemd"
	"github.com/vminit/vminit/internal/testing/ignitiontest"
	"github.com/vminit/vminit/network"
	"github.com/vminit/vminit/spec"
)

// guest is what a spec asks of a guest after first boot's Ignition
// stages, worked out from the spec alone (not from the config), so that
// applying the config with the real ignition binary checks the renderer.
type guest struct {
	files   map[string]wantFile // by path relative to the root
	dirs    map[string]wantFile // directories whose owner matters
	links   map[string]string   // path -> target
	presets map[string]string   // unit -> enable|disable
	users   map[string]*wantUser
}

type wantFile struct {
	data        *string // nil: not compared (generated scripts and units)
	mode        fs.FileMode
	user, group string
}

type wantUser struct {
	gecos, home, shell string
	system             bool
	primary            string // primary group, "" for the user's own
	groups             []string
	password           string // the shadow field
	keys               []string
}

func strp(s string) *string { return &s }

// expect derives the guest state the spec describes for variant.
func expect(t *testing.T, inst *spec.Instance, variant Variant) *guest {
	t.Helper()
	s := &inst.Spec
	g := &guest{files: map[string]wantFile{}, dirs: map[string]wantFile{}, links: map[string]string{}, presets: map[string]string{}, users: map[string]*wantUser{}}
	rel := func(p string) string { return strings.TrimPrefix(p, "/") }
	file := func(p string, data *string, mode fs.FileMode, owner string) {
		u, gr, _ := strings.Cut(owner, ":")
		if u == "" {
			u = "root"
		}
		if gr == "" {
			gr = "root" // Ignition, like chown(user, -1) on a file root creates
		}
		g.files[rel(p)] = wantFile{data, mode, u, gr}
	}
	if s.Hostname != "" {
		file("/etc/hostname", strp(s.Hostname+"\n"), 0o644, "")
	}
	if s.FQDN != "" && !slices.ContainsFunc(s.Files, func(f spec.File) bool { return f.Path == "/etc/hosts" }) {
		short, _, _ := strings.Cut(s.FQDN, ".")
		file("/etc/hosts", strp("127.0.0.1 "+s.FQDN+" "+short+"\n"), 0o644, "")
	}
	home := func(name string) string {
		for _, u := range s.Users {
			if u.Name == name {
				if u.HomeDir != "" {
					return u.HomeDir
				}
				if u.System {
					return ""
				}
			}
		}
		return "/home/" + name
	}
	for _, f := range s.Files {
		mode := fs.FileMode(0o644)
		if f.Mode != nil {
			mode = fs.FileMode(*f.Mode)
		}
		file(f.Path, strp(string(f.Data())), mode, f.Owner)
		if u, gr, _ := strings.Cut(f.Owner, ":"); u != "" && home(u) != "" && strings.HasPrefix(f.Path, home(u)+"/") {
			if gr == "" {
				gr = "root"
			}
			for d := path.Dir(f.Path); d != home(u); d = path.Dir(d) {
				g.dirs[rel(d)] = wantFile{user: u, group: gr}
			}
		}
	}
	for _, u := range s.Users {
		if u.Sudo != "" {
			file("/etc/sudoers.d/vminit-"+u.Name, strp(u.Name+" "+u.Sudo+"\n"), 0o440, "")
		}
	}
	unitFile := func(name string, content *string) {
		file(path.Join(systemd.UnitDir, name), content, 0o644, "")
	}
	for _, m := range s.Mounts {
		unitFile(systemd.MountUnitName(m.Path), strp(systemd.MountUnit(systemd.Mount(m))))
		g.presets[systemd.MountUnitName(m.Path)] = "enable"
	}
	for _, u := range s.Units {
		if u.Content != "" {
			unitFile(u.Name, strp(u.Content))
		}
		for _, d := range u.Dropins {
			unitFile(u.Name+".d/"+d.Name, strp(d.Content))
		}
		if u.Enabled != nil {
			g.presets[u.Name] = map[bool]string{true: "enable", false: "disable"}[*u.Enabled]
		}
	}
	if len(s.Commands) > 0 {
		file(FirstBootScript, nil, 0o700, "")
		unitFile(FirstBootUnit, nil)
		g.presets[FirstBootUnit] = "enable"
	}
	if len(s.BootCommands) > 0 {
		file(BootScript, nil, 0o700, "")
		unitFile(BootUnit, nil)
		g.presets[BootUnit] = "enable"
	}
	if s.Timezone != "" {
		g.links["etc/localtime"] = "../usr/share/zoneinfo/" + s.Timezone
	}
	if s.Network != nil {
		render := network.NMKeyfiles
		if variant == Flatcar {
			render = network.Networkd
		}
		files, err := render(s.Network)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			file(f.Path, strp(string(f.Data)), f.Mode, "")
		}
	}
	for _, u := range s.Users {
		w := &wantUser{gecos: u.Gecos, home: home(u.Name), shell: u.Shell, system: u.System, primary: u.PrimaryGroup, groups: u.Groups}
		if u.Name == DefaultUser {
			w.home = "/home/core"
			w.keys = append(w.keys, s.SSHAuthorizedKeys...)
		}
		for _, k := range u.SSHAuthorizedKeys {
			if !slices.Contains(w.keys, k) {
				w.keys = append(w.keys, k)
			}
		}
		switch locked := *u.LockPassword; {
		case u.PasswordHash != "" && locked:
			w.password = "!" + u.PasswordHash
		case u.PasswordHash != "":
			w.password = u.PasswordHash
		case locked:
			w.password = "!"
		default:
			w.password = "*" // useradd --password '*', Ignition's default
		}
		g.users[u.Name] = w
	}
	if _, listed := g.users[DefaultUser]; !listed && len(s.SSHAuthorizedKeys) > 0 {
		g.users[DefaultUser] = &wantUser{home: "/home/core", keys: s.SSHAuthorizedKeys, password: "*", gecos: "CoreOS Admin"}
	}
	return g
}

// ignitionArtifacts are files Ignition itself writes into the root.
var ignitionArtifacts = []string{
	"etc/.ignition-result.json",
	"etc/systemd/system-preset/20-ignition.preset",
	"etc/passwd-", "etc/group-", "etc/shadow-", "etc/gshadow-",
	"etc/subuid", "etc/subgid", "etc/subuid-", "etc/subgid-", "etc/.pwd.lock",
}

// checkGuest compares the root Ignition left with what the spec asks.
func checkGuest(t *testing.T, root string, g *guest) {
	t.Helper()
	passwd := readDB(t, root, "etc/passwd")
	group := readDB(t, root, "etc/group")
	shadow := readDB(t, root, "etc/shadow")
	userName := map[string]string{}
	for name, f := range passwd {
		userName[f[1]] = name
	}
	groupName := map[string]string{}
	for name, f := range group {
		groupName[f[1]] = name
	}
	owner := func(st fs.FileInfo) (string, string) {
		sys := st.Sys().(*syscall.Stat_t)
		return userName[fmt.Sprint(sys.Uid)], groupName[fmt.Sprint(sys.Gid)]
	}

	for p, w := range g.files {
		full := filepath.Join(root, p)
		st, err := os.Lstat(full)
		if err != nil {
			t.Errorf("%s: not written: %v", p, err)
			continue
		}
		if !st.Mode().IsRegular() {
			t.Errorf("%s: %v, not a regular file", p, st.Mode())
			continue
		}
		if got := st.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky); got != unixMode(w.mode) {
			t.Errorf("%s: mode %v, want %v", p, got, unixMode(w.mode))
		}
		if u, gr := owner(st); u != w.user || gr != w.group {
			t.Errorf("%s: owned by %s:%s, want %s:%s", p, u, gr, w.user, w.group)
		}
		if w.data != nil {
			if b, _ := os.ReadFile(full); string(b) != *w.data {
				t.Errorf("%s: content\n%q\nwant\n%q", p, b, *w.data)
			}
		}
	}
	for p, w := range g.dirs {
		st, err := os.Stat(filepath.Join(root, p))
		if err != nil || !st.IsDir() {
			t.Errorf("%s: no directory: %v", p, err)
			continue
		}
		if u, gr := owner(st); u != w.user || gr != w.group {
			t.Errorf("%s/: owned by %s:%s, want %s:%s", p, u, gr, w.user, w.group)
		}
	}
	for p, target := range g.links {
		if got, err := os.Readlink(filepath.Join(root, p)); err != nil || got != target {
			t.Errorf("%s -> %q (%v), want -> %q", p, got, err, target)
		}
	}

	presets := map[string]string{}
	if b, err := os.ReadFile(filepath.Join(root, "etc/systemd/system-preset/20-ignition.preset")); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if verb, unit, ok := strings.Cut(line, " "); ok {
				presets[unit] = verb
			}
		}
	}
	if fmt.Sprint(presets) != fmt.Sprint(g.presets) {
		t.Errorf("presets %v, want %v", presets, g.presets)
	}

	for name, w := range g.users {
		pw, ok := passwd[name]
		if !ok {
			t.Errorf("user %s: not in etc/passwd", name)
			continue
		}
		// name:x:uid:gid:gecos:home:shell
		if w.gecos != "" && pw[3] != w.gecos {
			t.Errorf("user %s: gecos %q, want %q", name, pw[3], w.gecos)
		}
		if w.home != "" && pw[4] != w.home {
			t.Errorf("user %s: home %q, want %q", name, pw[4], w.home)
		}
		if w.shell != "" && pw[5] != w.shell {
			t.Errorf("user %s: shell %q, want %q", name, pw[5], w.shell)
		}
		var uid int
		fmt.Sscan(pw[1], &uid)
		if w.system != (uid < 1000) {
			t.Errorf("user %s: uid %d, system %v", name, uid, w.system)
		}
		wantPrimary := w.primary
		if wantPrimary == "" {
			wantPrimary = name
			if name == DefaultUser {
				wantPrimary = "core"
			}
		}
		if got := groupName[pw[2]]; got != wantPrimary {
			t.Errorf("user %s: primary group %q, want %q", name, got, wantPrimary)
		}
		for _, gr := range w.groups {
			if e, ok := group[gr]; !ok || !slices.Contains(strings.Split(e[2], ","), name) {
				t.Errorf("user %s: not a member of %s (%v)", name, gr, e)
			}
		}
		if sh := shadow[name]; len(sh) < 1 || sh[0] != w.password {
			t.Errorf("user %s: shadow password %v, want %q", name, sh, w.password)
		}
		homeDir := filepath.Join(root, pw[4])
		if st, err := os.Stat(homeDir); w.system && err == nil {
			t.Errorf("system user %s got a home directory", name)
		} else if !w.system && (err != nil || fmt.Sprint(st.Sys().(*syscall.Stat_t).Uid) != pw[1]) {
			t.Errorf("user %s: home %s missing or not theirs: %v", name, pw[4], err)
		}
		keysFile := filepath.Join(homeDir, ".ssh/authorized_keys.d/ignition")
		b, err := os.ReadFile(keysFile)
		var keys []string
		if err == nil {
			keys = strings.Split(strings.TrimSpace(string(b)), "\n")
		}
		if strings.Join(keys, "\n") != strings.Join(trimAll(w.keys), "\n") {
			t.Errorf("user %s: authorized keys %q, want %q", name, keys, w.keys)
		}
	}

	// Nothing else: every file in the root is seeded, expected, or
	// Ignition's own.
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		r, _ := filepath.Rel(root, p)
		_, seeded := ignitiontest.SeedRoot[r]
		_, wanted := g.files[r]
		_, linked := g.links[r]
		if !seeded && !wanted && !linked && !slices.Contains(ignitionArtifacts, r) && !strings.HasSuffix(r, "/.ssh/authorized_keys.d/ignition") {
			t.Errorf("%s: written, but not asked for", r)
		}
		return nil
	})
}

// unixMode turns permission bits as the spec writes them (07777) into an
// fs.FileMode.
func unixMode(m fs.FileMode) fs.FileMode {
	out := m & fs.ModePerm
	if m&0o4000 != 0 {
		out |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		out |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		out |= fs.ModeSticky
	}
	return out
}

func trimAll(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = strings.TrimRight(k, "\n")
	}
	return out
}

// readDB reads a colon-separated account database by its first field.
func readDB(t *testing.T, root, name string) map[string][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) > 1 {
			out[fields[0]] = fields[1:]
		}
	}
	return out
}
