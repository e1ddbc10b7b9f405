package e2e

// Real guests: Debian 12 with its own cloud-init 22.4, and the same root
// with Debian's Ignition 2.14 in a dracut initramfs (package guesttest,
// scripts/install-test-guests.sh), booted by `vminit run`'s engine
// (cmd/internal/run) with each example on each delivery path. The guest
// prints its state on the serial console once its agent is done and powers
// off; the tests read that report.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/cmd/internal/run"
	"github.com/vminit/vminit/internal/testing/guesttest"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/spec"
)

const (
	devVM       = "../../../examples/dev-vm.yaml"
	fcosServer  = "../../../examples/fcos-server.yaml"
	ubuntuFiles = "../../../examples/ubuntu-server/files"
)

// guestSlots bounds the guests booting at once: each takes a core.
var guestSlots = make(chan struct{}, 2)

// guestBootTimeout bounds one boot, from QEMU's start to its exit. A first
// boot takes about a minute under TCG on an idle core, several on a loaded
// machine; with KVM, seconds.
const guestBootTimeout = 12 * time.Minute

// guestAccel is the accelerator the guest tests ask for: VMINIT_TEST_ACCEL
// (kvm, tcg), else auto.
func guestAccel() string {
	if a := os.Getenv("VMINIT_TEST_ACCEL"); a != "" {
		return a
	}
	return "auto"
}

// runsFile counts the runs of the first-boot command countRuns adds.
const runsFile = "/var/lib/vminit-test/runs"

// loadGuestSpec reads an example and adds a first-boot command that
// appends a line to runsFile, so a second boot can show it did not run again.
func loadGuestSpec(t *testing.T, path string) *spec.Instance {
	t.Helper()
	inst, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	inst.Spec.Commands = append(inst.Spec.Commands,
		spec.Command{Shell: "mkdir -p " + filepath.Dir(runsFile) + " && echo run >> " + runsFile})
	if err := inst.Validate(); err != nil {
		t.Fatal(err)
	}
	return inst
}

// bootGuest boots one guest to power-off and returns the agent's result
// (first boots only: a second boot is not waited on by the agent's report)
// and the guest's report.
func bootGuest(t *testing.T, o run.Options, firstBoot bool) (*run.Result, *guesttest.Report) {
	t.Helper()
	guestSlots <- struct{}{}
	defer func() { <-guestSlots }()
	ctx, cancel := context.WithTimeout(context.Background(), guestBootTimeout)
	defer cancel()
	if o.Memory == "" {
		o.Memory = "1G"
	}
	if o.CPUs == 0 {
		// Two guests share two cores: a second vCPU each only adds
		// contention under TCG.
		o.CPUs = 1
	}
	if o.Accel == "" {
		o.Accel = guestAccel()
	}
	o.Timeout = guestBootTimeout
	var progress testtools.SyncBuffer
	o.Progress = &progress
	g, err := run.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	var res *run.Result
	if firstBoot {
		if res, err = g.WaitFirstBoot(ctx); err != nil {
			t.Fatalf("first boot: %v\n%s", err, tail(g.Console(), 60))
		}
		if res.Err != nil {
			t.Fatalf("first boot: %v\n%s", res.Err, res.ConsoleTail)
		}
		// The accelerator run chose is on its first progress line
		// ("QEMU started: ..., TCG (software emulation)").
		accel, _, _ := strings.Cut(progress.String(), "\n")
		t.Logf("%s: first boot done in %s, %s", t.Name(), res.Elapsed.Round(100*time.Millisecond), strings.TrimSpace(accel[strings.LastIndex(accel, ",")+1:]))
	}
	// The report unit powers the guest off after printing.
	if err := g.Wait(ctx); err != nil {
		t.Logf("qemu: %v", err)
	}
	rep, err := guesttest.ParseReport(g.Console())
	if err != nil {
		t.Fatalf("%v\n%s", err, tail(g.Console(), 60))
	}
	return res, rep
}

// tail returns the last n lines of a console.
func tail(b []byte, n int) string {
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// guestCheck collects a report's mismatches; the test fails once, listing all
// of them with the report, so one boot shows every problem.
type guestCheck struct {
	t    *testing.T
	rep  *guesttest.Report
	errs []string
}

func (c *guestCheck) errorf(format string, a ...any) {
	c.errs = append(c.errs, "  "+strings.TrimSpace(fmt.Sprintf(format, a...)))
}

func (c *guestCheck) done() {
	c.t.Helper()
	if len(c.errs) == 0 {
		return
	}
	// What says why comes first: CI keeps only the head of a long failure.
	var why, rest []string
	for _, s := range c.rep.Sections {
		lines := append([]string{"## " + s.Name + " " + strings.Join(s.Args, " ")}, s.Lines...)
		if diagnosticSections[s.Name] {
			why = append(why, lines...)
		} else {
			rest = append(rest, lines...)
		}
	}
	c.t.Errorf("the guest's state differs:\n%s\nreport, why first:\n%s\n%s", strings.Join(c.errs, "\n"), strings.Join(why, "\n"), strings.Join(rest, "\n"))
}

// diagnosticSections are the report's sections that say why a boot went
// wrong: the agent's own result and warnings, failed units and their
// journals, and the storage the guest ended with.
var diagnosticSections = map[string]bool{
	"agent": true, "boot": true, "cloud-init-status": true, "cloud-init-result": true,
	"cloud-init-warnings": true, "warnings": true, "ignition-journal": true, "ignition-units": true,
	"failed-units": true, "journal": true, "units": true, "mounts": true, "lsblk": true, "swaps": true,
}

func (c *guestCheck) text(section, want string) {
	if got := strings.TrimSpace(c.rep.Text(section)); got != want {
		c.errorf("%s = %q, want %q", section, got, want)
	}
}

// contains wants a line of section matching re.
func (c *guestCheck) contains(section, re string) {
	if !regexp.MustCompile("(?m)" + re).MatchString(c.rep.Text(section)) {
		c.errorf("%s: no line matches %q", section, re)
	}
}

func (c *guestCheck) file(path, mode, owner, group, content string) {
	f, ok := c.rep.File(path)
	switch {
	case !ok:
		c.errorf("%s: missing", path)
	case f.Mode != mode || f.Owner != owner || f.Group != group:
		c.errorf("%s: mode %s owner %s:%s, want %s %s:%s", path, f.Mode, f.Owner, f.Group, mode, owner, group)
	case content != "" && f.Content != content:
		c.errorf("%s: content %q, want %q", path, f.Content, content)
	}
}

// fileContains wants path to exist with a line matching re.
func (c *guestCheck) fileContains(path, re string) {
	f, ok := c.rep.File(path)
	if !ok {
		c.errorf("%s: missing", path)
		return
	}
	if !regexp.MustCompile("(?m)" + re).MatchString(f.Content) {
		c.errorf("%s: no line matches %q in %q", path, re, f.Content)
	}
}

func (c *guestCheck) unit(name, fileState, activeState string) {
	p, ok := c.rep.Unit(name)
	if !ok {
		c.errorf("unit %s: not in the report", name)
		return
	}
	if fileState != "" && p["UnitFileState"] != fileState {
		c.errorf("unit %s: UnitFileState %s, want %s", name, p["UnitFileState"], fileState)
	}
	if activeState != "" && p["ActiveState"] != activeState {
		c.errorf("unit %s: ActiveState %s (%s, result %s), want %s", name, p["ActiveState"], p["SubState"], p["Result"], activeState)
	}
}

func (c *guestCheck) user(name, gecos, shell string, groups ...string) {
	u, ok := c.rep.User(name)
	if !ok {
		c.errorf("user %s: missing", name)
		return
	}
	if gecos != "" && !strings.HasPrefix(u.Gecos, gecos) {
		c.errorf("user %s: gecos %q, want %q", name, u.Gecos, gecos)
	}
	if shell != "" && u.Shell != shell {
		c.errorf("user %s: shell %q, want %q", name, u.Shell, shell)
	}
	for _, g := range groups {
		m, ok := c.rep.GroupMembers(g)
		if !ok {
			c.errorf("group %s: missing", g)
			continue
		}
		if !contains(m, name) {
			c.errorf("group %s: members %q lack %s", g, m, name)
		}
	}
}

// keyFor wants key among the authorized keys of home (any file of
// .ssh/authorized_keys and .ssh/authorized_keys.d).
func (c *guestCheck) keyFor(home, key string) {
	for _, s := range c.rep.Sections {
		if s.Name != "file" || len(s.Args) == 0 || !strings.HasPrefix(s.Args[0], home+"/.ssh/authorized_keys") {
			continue
		}
		if strings.Contains(s.Text(), key) {
			return
		}
	}
	c.errorf("%s: key %.40s... not authorized", home, key)
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// cloudInitOK wants cloud-init's own verdict: done, no errors.
func (c *guestCheck) cloudInitOK(res *run.Result) {
	if c.rep.Agent() != "cloud-init" {
		c.errorf("agent %q, want cloud-init", c.rep.Agent())
	}
	if res != nil {
		// cloud-init's WARNING lines are res.Warnings, logged here: the
		// verdict is cloud-init's own (its errors and status below).
		for _, w := range res.Warnings {
			c.t.Logf("cloud-init warned: %s", w)
		}
		if !res.OK || len(res.Errors) > 0 {
			c.errorf("run: OK %v, errors %q", res.OK, res.Errors)
		}
	}
	c.contains("cloud-init-status", `^status: done$`)
	c.contains("cloud-init-result", `"errors": \[\]`)
}

// ignitionOK wants Ignition's stages to have succeeded and no warnings.
func (c *guestCheck) ignitionOK(res *run.Result) {
	if c.rep.Agent() != "ignition" {
		c.errorf("agent %q, want ignition", c.rep.Agent())
	}
	if res != nil && (!res.OK || len(res.Errors) > 0) {
		c.errorf("run: OK %v, errors %q", res.OK, res.Errors)
	}
	c.contains("ignition-units", `^Id=ignition-files.service$`)
	c.contains("ignition-units", `^Result=success$`)
	if s := strings.TrimSpace(c.rep.Text("ignition-journal")); s != "" {
		c.errorf("Ignition warned or failed:\n%s", s)
	}
}

// startCheck begins the checks of a report: on a first boot the agent's
// verdict, on every boot the disk's boot count.
func startCheck(t *testing.T, res *run.Result, rep *guesttest.Report, agent string, boot int) *guestCheck {
	c := &guestCheck{t: t, rep: rep}
	if boot == 1 {
		if agent == "ignition" {
			c.ignitionOK(res)
		} else {
			c.cloudInitOK(res)
		}
	}
	if rep.Boot() != boot {
		c.errorf("boot %d, want %d", rep.Boot(), boot)
	}
	return c
}

// Keys of the examples.
const (
	aliceKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIOcQfB+HkOOjJNE+kDUn8dHs94p8jX2ceyNdSdYS5bh alice@example.com"
	opsKey   = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIBdnIeQkVVFSAROQDSX0rDjqGVQFBRRIu++HM7Atjgs ops@example.com"
)

// checkDevVM: examples/dev-vm.yaml on Debian's cloud-init: hostname, the
// key on the image's default user, the first-boot command run once.
func checkDevVM(t *testing.T, res *run.Result, rep *guesttest.Report) {
	t.Helper()
	c := startCheck(t, res, rep, "cloud-init", 1)
	c.text("hostname", "dev")
	c.user("debian", "", "/bin/bash", "sudo")
	c.keyFor("/home/debian", aliceKey)
	c.file(runsFile, "644", "root", "root", "run\n")
	c.done()
}

// checkUbuntuServer: examples/ubuntu-server on Debian's cloud-init, with two
// NICs carrying the spec's MACs for the bond.
func checkUbuntuServer(t *testing.T, res *run.Result, rep *guesttest.Report, boot int) {
	t.Helper()
	site, err := os.ReadFile(filepath.Join(ubuntuFiles, "site.conf"))
	if err != nil {
		t.Fatal(err)
	}
	c := startCheck(t, res, rep, "cloud-init", boot)
	c.text("hostname", "web-1")
	c.text("hostname-fqdn", "web-1.prod.example.com")
	c.text("timezone", "/usr/share/zoneinfo/Europe/Berlin")
	// Users, groups, keys, sudo.
	c.user("alice", "Alice Admin", "/bin/bash", "adm", "sudo")
	c.keyFor("/home/alice", aliceKey)
	c.keyFor("/home/debian", opsKey)
	c.fileContains("/etc/sudoers.d/90-cloud-init-users", `^alice ALL=\(ALL\) NOPASSWD:ALL$`)
	if u, ok := rep.User("deploy"); !ok || len(u.UID) > 3 || u.Shell != "/usr/sbin/nologin" {
		c.errorf("deploy: %+v (present %v), want a system user with /usr/sbin/nologin", u, ok)
	}
	// Files with mode and owner.
	c.file("/etc/nginx/conf.d/site.conf", "644", "root", "root", string(site))
	c.file("/etc/motd", "644", "root", "root", "web-1: managed by vminit. Changes here are overwritten on rebuild.\n")
	c.file("/srv/app/env", "600", "deploy", "deploy", "LISTEN=:8080\n")
	// Units: enabled and started, the drop-in in place.
	c.unit("app.service", "enabled", "active")
	c.unit("nginx.service", "enabled", "active")
	if p, _ := rep.Unit("nginx.service"); !strings.Contains(p["DropInPaths"], "/etc/systemd/system/nginx.service.d/10-restart.conf") {
		c.errorf("nginx.service: drop-ins %q", p["DropInPaths"])
	}
	// First-boot commands: once.
	c.file("/var/log/first-boot.log", "644", "root", "root", "first boot done on web-1\n")
	c.file(runsFile, "644", "root", "root", "run\n")
	// Mounts: vminit writes a mount unit (the test attaches no "data" disk;
	// nofail keeps the boot going).
	c.contains("mounts", `^/ /dev/vda2 ext4$`)
	c.unit("srv-data.mount", "enabled", "")
	c.fileContains("/etc/systemd/system/srv-data.mount", `^What=/dev/disk/by-label/data$`)
	// Static network: NICs matched by MAC and renamed, the bond, the VLAN.
	c.contains("link", `^\d+: nic0: .*master bond0 .*link/ether 52:54:00:12:34:01`)
	c.contains("link", `^\d+: nic1: .*master bond0 .*`)
	c.contains("link", `^\d+: bond0: .*mtu 9000 .*link/ether 52:54:00:12:34:01`)
	c.contains("link", `^\d+: bond0\.20@bond0: `)
	c.contains("addr", `^\d+: bond0\s+inet 192\.0\.2\.10/24 `)
	c.contains("addr", `^\d+: bond0\s+inet6 2001:db8::10/64 `)
	c.contains("addr", `^\d+: bond0\.20\s+inet 198\.51\.100\.10/24 `)
	c.contains("route", `^default via 192\.0\.2\.1 dev bond0`)
	if strings.Contains(rep.Text("cloud-init-status"), "DataSourceNoCloud") {
		// NoCloud carries vminit's network-config version 2, whose route
		// metric cloud-init 22.4 drops (its v2 parser ignores "metric"; the
		// config drive's network_data.json and version 1 keep it).
		c.contains("route", `^203\.0\.113\.0/24 via 198\.51\.100\.1 dev bond0\.20 `)
	} else {
		c.contains("route", `^203\.0\.113\.0/24 via 198\.51\.100\.1 dev bond0\.20 .*metric 100`)
	}
	c.contains("route6", `^default via 2001:db8::1 dev bond0`)
	c.contains("resolv.conf", `^nameserver 192\.0\.2\.53$`)
	c.contains("resolv.conf", `^nameserver 2001:db8::53$`)
	c.contains("resolv.conf", `^search prod\.example\.com`)
	b, _ := rep.Section("bonding", "bond0")
	for _, re := range []string{`Bonding Mode: fault-tolerance \(active-backup\)`, `Primary Slave: nic0`, `MII Polling Interval \(ms\): 100`, `Slave Interface: nic1`} {
		if !regexp.MustCompile(re).MatchString(b.Text()) {
			c.errorf("bond0: no %q in\n%s", re, b.Text())
		}
	}
	c.contains("vlan", `^bond0\.20\s+\|\s+20\s+\|\s+bond0`)
	c.done()
}

// checkFCOSServer: examples/fcos-server.yaml applied by Ignition in the
// initramfs, then systemd's first boot (presets) and the first-boot unit.
func checkFCOSServer(t *testing.T, res *run.Result, rep *guesttest.Report, boot int) {
	t.Helper()
	c := startCheck(t, res, rep, "ignition", boot)
	c.text("hostname", "fcos-1")
	c.text("timezone", "../usr/share/zoneinfo/Europe/Berlin")
	c.user("core", "", "")
	c.user("alice", "Alice Admin", "", "wheel")
	c.keyFor("/home/core", opsKey)
	c.keyFor("/home/alice", aliceKey)
	c.file("/etc/sudoers.d/vminit-alice", "440", "root", "root", "alice ALL=(ALL) NOPASSWD:ALL\n")
	c.file("/etc/motd.d/vminit", "644", "root", "root", "fcos-1: managed by vminit.\n")
	c.file("/var/srv/app/env", "600", "alice", "alice", "LISTEN=:8080\n")
	c.fileContains("/etc/hosts", `^127\.0\.0\.1 fcos-1\.example\.com fcos-1$`)
	c.unit("app.service", "enabled", "active")
	c.unit("vminit-first-boot.service", "enabled", "")
	c.unit("var-srv-data.mount", "enabled", "")
	c.file("/etc/systemd/system/zincati.service.d/10-delay.conf", "644", "root", "root", "[Service]\nEnvironment=ZINCATI_VERBOSITY=-v\n")
	c.file("/var/log/first-boot.log", "644", "root", "root", "first boot done\n")
	c.file(runsFile, "644", "root", "root", "run\n")
	// The NIC renamed by the .link file, configured by NetworkManager.
	c.contains("link", `^\d+: nic0: .*link/ether 52:54:00:12:34:01`)
	c.contains("addr", `^\d+: nic0\s+inet 192\.0\.2\.20/24 `)
	c.contains("route", `^default via 192\.0\.2\.1 dev nic0`)
	c.contains("resolv.conf", `^nameserver 192\.0\.2\.53$`)
	c.done()
}

// checkDelivered: the least every path must show, that the guest's agent got
// the spec: its hostname and the key on a user.
func checkDelivered(t *testing.T, res *run.Result, rep *guesttest.Report, agent, hostname, home, key string) {
	t.Helper()
	c := startCheck(t, res, rep, agent, 1)
	c.text("hostname", hostname)
	c.keyFor(home, key)
	c.file(runsFile, "644", "root", "root", "run\n")
	c.done()
}

// TestGuestBootsThroughItsBootLoader is the issue's "done when": `vminit
// run examples/dev-vm.yaml --image debian-cloudinit.qcow2`, no kernel flags,
// QEMU's BIOS, the image's boot loader, a NoCloud ISO.
func TestGuestBootsThroughItsBootLoader(t *testing.T) {
	im := guesttest.Find(t)
	t.Parallel()
	res, rep := bootGuest(t, run.Options{Instance: loadGuestSpec(t, devVM), Image: im.CloudInitDisk}, true)
	checkDevVM(t, res, rep)
}

// TestGuestCloudInitPaths boots the cloud-init guest once per delivery path
// (its kernel booted directly, as a cloud boots an image's kernel).
func TestGuestCloudInitPaths(t *testing.T) {
	im := guesttest.Find(t)
	t.Parallel()
	direct := func(o run.Options) run.Options {
		o.Image, o.Kernel, o.Initrd, o.Append = im.CloudInitDisk, im.Kernel, im.Initrd, guesttest.CloudInitAppend
		return o
	}
	for _, tc := range []struct {
		name string
		o    run.Options
	}{
		{"NoCloudVFAT", run.Options{Datasource: "nocloud", Media: "vfat"}},
		{"NoCloudNet", run.Options{Serve: true, Dialect: "nocloud"}},
		{"EC2", run.Options{Serve: true, Dialect: "ec2"}},
		{"OpenStack", run.Options{Serve: true, Dialect: "openstack"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.o.Instance = loadGuestSpec(t, devVM)
			res, rep := bootGuest(t, direct(tc.o), true)
			checkDelivered(t, res, rep, "cloud-init", "dev", "/home/debian", aliceKey)
			if tc.o.Serve {
				checkServedDone(t, res)
			}
		})
	}
	// The full example on the two drive paths; the NoCloud one boots twice.
	for _, tc := range []struct {
		name string
		o    run.Options
	}{
		{"UbuntuServerNoCloudISO", run.Options{Datasource: "nocloud", Media: "iso"}},
		{"UbuntuServerConfigDriveISO", run.Options{Datasource: "configdrive", Media: "iso"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.o.Instance = loadGuestSpec(t, example)
			tc.o.NICs = 1
			o := direct(tc.o)
			second := tc.o.Datasource == "nocloud"
			if second {
				o.Overlay = filepath.Join(t.TempDir(), "disk.qcow2")
			}
			res, rep := bootGuest(t, o, true)
			checkUbuntuServer(t, res, rep, 1)
			if second && !t.Failed() {
				_, rep = bootGuest(t, o, false)
				checkUbuntuServer(t, nil, rep, 2)
			}
		})
	}
}

// TestGuestIgnitionPaths boots the Ignition guest once per delivery path:
// fw_cfg (platform qemu; the full example, and a second boot), a config
// drive (openstack) and the metadata server (aws, openstack).
func TestGuestIgnitionPaths(t *testing.T) {
	im := guesttest.Find(t)
	t.Parallel()
	ign := func(o run.Options, platform string, firstBoot bool) run.Options {
		o.Instance = loadGuestSpec(t, fcosServer)
		o.Image, o.Kernel, o.Initrd = im.IgnitionDisk, im.Kernel, im.IgnitionInitrd
		o.Append = guesttest.IgnitionAppend(platform, firstBoot, o.Serve)
		return o
	}
	t.Run("FwCfg", func(t *testing.T) {
		t.Parallel()
		o := ign(run.Options{Datasource: "fwcfg"}, "qemu", true)
		o.Overlay = filepath.Join(t.TempDir(), "disk.qcow2")
		res, rep := bootGuest(t, o, true)
		checkFCOSServer(t, res, rep, 1)
		if t.Failed() {
			return
		}
		o.Append = guesttest.IgnitionAppend("qemu", false, false)
		_, rep = bootGuest(t, o, false)
		checkFCOSServer(t, nil, rep, 2)
	})
	for _, tc := range []struct {
		name, platform string
		o              run.Options
	}{
		{"ConfigDrive", "openstack", run.Options{Datasource: "configdrive"}},
		{"AWS", "aws", run.Options{Serve: true, Dialect: "aws"}},
		{"OpenStack", "openstack", run.Options{Serve: true, Dialect: "openstack"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, rep := bootGuest(t, ign(tc.o, tc.platform, true), true)
			checkDelivered(t, res, rep, "ignition", "fcos-1", "/home/alice", aliceKey)
		})
	}
}
