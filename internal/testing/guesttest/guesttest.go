// Package guesttest finds the real Debian 12 guests that
// scripts/install-test-guests.sh builds, and reads the report they print on
// their serial console, so tests can check what a guest's own cloud-init
// 22.4 or Ignition 2.14 made of vminit's seeds.
//
// The images live in VMINIT_TEST_GUESTS_DIR (default DefaultDir); when they
// are missing a test is skipped, or failed under CI=true or
// VMINIT_REQUIRE_TOOLS=1 (see package testtools). Boot them with
// cmd/internal/run: the base images are never written, each boot gets a
// qcow2 overlay. A storage test gives a guest extra disks (Disks: sparse
// raw files, for run's Options.Disks) and a root disk larger than its file
// system (GrownOverlay, for Options.Overlay); both outlive a boot, so a
// second boot of the same paths is a reboot of the same machine.
//
// Each guest runs vminit-guest-report.service once its agent is done (after
// cloud-final.service; after multi-user.target and vminit-first-boot.service
// on the Ignition guest). It prints the state between ReportBegin and
// ReportEnd, each line prefixed with "VMR|" so that kernel and journal
// messages on the same console are told apart, and powers the guest off.
// The report is a list of sections, each opened by a "## NAME ARGS" line:
//
//	agent, boot                       "cloud-init" | "ignition"; the boot count of this disk
//	cloud-init-status, cloud-init-result   cloud-init status --long; /run/cloud-init/result.json
//	ignition-journal, ignition-units  Ignition's warnings and errors; its stages' results
//	hostname, hostname-fqdn, timezone
//	passwd, group, shadow             getent; the first two characters of each password field
//	file PATH MODE USER GROUP TYPE    stat, then the content of a small regular file
//	units                             systemctl show of the units in /etc/systemd/system
//	failed-units, link, addr, route, route6, resolv.conf, bonding IFACE, vlan, mounts
//	lsblk                             lsblk -J -b: disks, partitions, file systems, labels, sizes
//	swaps                             swapon --show: the active swap areas
//
// docs/guests.md describes the guests and how they are built.
package guesttest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/testtools"
)

// DefaultDir is where scripts/install-test-guests.sh puts the guests unless
// VMINIT_TEST_GUESTS_DIR says otherwise.
const DefaultDir = "/var/cache/vminit-test-guests"

// RootLabel is the ext4 label of the cloud-init guest's root file system.
const RootLabel = "vminit-root"

// Images are the files of one guest build.
type Images struct {
	Dir string
	// CloudInitDisk is the bootable cloud-init guest: MBR, syslinux, a FAT
	// /boot and the ext4 root; it boots with QEMU's default BIOS.
	CloudInitDisk string
	// Kernel and Initrd are the cloud-init guest's kernel and initramfs,
	// for a direct kernel boot of CloudInitDisk (CloudInitAppend) and, with
	// IgnitionInitrd, of IgnitionDisk.
	Kernel, Initrd string
	// IgnitionDisk is the root prepared for an Ignition first boot (ext4 on
	// /dev/vda1), booted with Kernel, IgnitionInitrd and IgnitionAppend.
	IgnitionDisk   string
	IgnitionInitrd string
	// Key is the build's hash (the script and the package versions).
	Key string
}

// CloudInitAppend is the kernel command line of a direct kernel boot of the
// cloud-init guest, the one its boot loader uses.
const CloudInitAppend = "root=LABEL=" + RootLabel + " rw console=ttyS0 " + NoTimerCheck

// NoTimerCheck is on every test guest's kernel command line: under TCG on
// a loaded machine the kernel's check that the timer reaches the IO-APIC
// can miss its window and panic ("IO-APIC + timer doesn't work!") before
// anything is tested; cloud images made for virtual machines (Fedora's,
// CentOS's) set it for the same reason.
const NoTimerCheck = "no_timer_check"

// IgnitionAppend is the kernel command line of the Ignition guest for
// Ignition's platform ("qemu", "openstack", "aws"). firstBoot adds
// ignition.firstboot, which makes the initramfs run Ignition: without it the
// disk boots as provisioned. network brings the initramfs' network up (DHCP)
// for the platforms that fetch the config from a metadata server. Ignition's
// errors reach the console, and an emergency in the initramfs powers the
// guest off instead of waiting for a shell.
func IgnitionAppend(platform string, firstBoot, network bool) string {
	a := "root=/dev/vda1 rw console=ttyS0 " + NoTimerCheck + " systemd.journald.forward_to_console=1 rd.emergency=poweroff"
	if firstBoot {
		a += " ignition.firstboot ignition.platform.id=" + platform
	}
	if network {
		a += " rd.neednet=1 ip=dhcp"
	}
	return a
}

// Dir returns VMINIT_TEST_GUESTS_DIR, else DefaultDir.
func Dir() string {
	if d := os.Getenv("VMINIT_TEST_GUESTS_DIR"); d != "" {
		return d
	}
	return DefaultDir
}

// Find returns the guests' files, or stops the test when they are missing: a
// skip, or a failure under CI (testtools.Missing).
func Find(t testing.TB) *Images {
	t.Helper()
	im, err := Lookup(Dir())
	if err != nil {
		testtools.Missing(t, err.Error()+" (scripts/install-test-guests.sh)")
		return nil
	}
	return im
}

// Lookup returns the guests' files in dir, or an error naming what is missing.
func Lookup(dir string) (*Images, error) {
	im := &Images{
		Dir:            dir,
		CloudInitDisk:  filepath.Join(dir, "debian-cloudinit.qcow2"),
		Kernel:         filepath.Join(dir, "vmlinuz"),
		Initrd:         filepath.Join(dir, "initrd.img"),
		IgnitionDisk:   filepath.Join(dir, "ignition.qcow2"),
		IgnitionInitrd: filepath.Join(dir, "initrd-ignition.img"),
	}
	key, err := os.ReadFile(filepath.Join(dir, "KEY"))
	if err != nil {
		return nil, fmt.Errorf("test guests not built in %s", dir)
	}
	im.Key = strings.TrimSpace(string(key))
	var missing []string
	for _, p := range []string{im.CloudInitDisk, im.Kernel, im.Initrd, im.IgnitionDisk, im.IgnitionInitrd} {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			missing = append(missing, filepath.Base(p))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("test guests in %s lack %s", dir, strings.Join(missing, ", "))
	}
	return im, nil
}

// RequirePackages stops the test, as Find does when the guests are
// missing, unless both guests have every one of pkgs installed (the build's
// VERSIONS): a guest built by an older script boots, but lacks what the
// test needs and fails it slowly, on a boot timeout.
func (im *Images) RequirePackages(t testing.TB, pkgs ...string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(im.Dir, "VERSIONS"))
	if err != nil {
		testtools.Missing(t, err.Error()+" (scripts/install-test-guests.sh)")
		return
	}
	if missing := missingPackages(string(b), pkgs); len(missing) > 0 {
		testtools.Missing(t, fmt.Sprintf("test guests in %s lack %s: built before the script installed them (rerun scripts/install-test-guests.sh)", im.Dir, strings.Join(missing, ", ")))
	}
}

// missingPackages returns those of pkgs that some guest of a VERSIONS file
// ("# cloud-init guest", then dpkg-query -W lines, then "# Ignition
// guest" and its) does not list.
func missingPackages(versions string, pkgs []string) []string {
	var guests []map[string]bool
	for _, l := range strings.Split(versions, "\n") {
		if strings.HasPrefix(l, "# ") {
			guests = append(guests, map[string]bool{})
			continue
		}
		if f := strings.Fields(l); len(f) > 0 && len(guests) > 0 {
			guests[len(guests)-1][strings.SplitN(f[0], ":", 2)[0]] = true // "pkg:amd64"
		}
	}
	var missing []string
	for _, p := range pkgs {
		has := len(guests) > 0
		for _, g := range guests {
			has = has && g[p]
		}
		if !has {
			missing = append(missing, p)
		}
	}
	return missing
}
