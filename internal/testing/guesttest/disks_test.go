package guesttest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"

	"github.com/vminit/vminit/internal/testing/testtools"
)

// TestDisksAreSparse: the extra disks have their size and no blocks, so a
// test's 1 GiB disk costs the host what the guest writes.
func TestDisksAreSparse(t *testing.T) {
	disks := Disks(t, 2, 1<<30)
	if len(disks) != 2 || disks[0] == disks[1] {
		t.Fatalf("disks %q", disks)
	}
	for _, d := range disks {
		var st syscall.Stat_t
		if err := syscall.Stat(d, &st); err != nil {
			t.Fatal(err)
		}
		if st.Size != 1<<30 || st.Blocks != 0 || st.Mode&0o777 != 0o600 {
			t.Errorf("%s: %d bytes, %d blocks, mode %o; want 1 GiB, none, 600", d, st.Size, st.Blocks, st.Mode&0o777)
		}
	}
}

// TestGrownOverlay: the overlay is a qcow2 over the base whose disk is the
// base's and the growth, naming only the base.
func TestGrownOverlay(t *testing.T) {
	img := testtools.Require(t, "qemu-img")
	base := filepath.Join(t.TempDir(), "base.qcow2")
	if out, err := exec.Command(img, "create", "-q", "-f", "qcow2", base, "64M").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	overlay := GrownOverlay(t, base, 1<<30)
	out, err := exec.Command(img, "info", "--output=json", overlay).Output()
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Format          string `json:"format"`
		VirtualSize     int64  `json:"virtual-size"`
		BackingFilename string `json:"backing-filename"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatal(err)
	}
	if info.Format != "qcow2" || info.VirtualSize != 64<<20+1<<30 || info.BackingFilename != base {
		t.Errorf("overlay %+v, want a qcow2 of %d bytes over %s", info, 64<<20+1<<30, base)
	}
	if _, err := os.Stat(base); err != nil {
		t.Fatal(err)
	}
}

func TestMissingPackages(t *testing.T) {
	versions := "# cloud-init guest\ncloud-init\t22.4.2-1\nxfsprogs\t6.1.0-1\nlibc6:amd64\t2.36\n# Ignition guest\ncloud-init\t22.4.2-1\nlibc6:amd64\t2.36\nignition\t2.14.0\n"
	if got := missingPackages(versions, []string{"cloud-init", "libc6", "xfsprogs", "gdisk"}); !reflect.DeepEqual(got, []string{"xfsprogs", "gdisk"}) {
		t.Errorf("missing %q, want xfsprogs (the Ignition guest lacks it) and gdisk", got)
	}
	if got := missingPackages("", []string{"cloud-init"}); !reflect.DeepEqual(got, []string{"cloud-init"}) {
		t.Errorf("no guests: missing %q", got)
	}
}
