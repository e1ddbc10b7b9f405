package guesttest

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

const console = "[    1.0] Linux version 6.1\r\n" +
	"-----BEGIN VMINIT GUEST REPORT-----\r\n" +
	"VMR|## agent cloud-init\r\n" +
	"VMR|## boot 2\r\n" +
	"VMR|## hostname\r\n" +
	"VMR|web-1\r\n" +
	"[   40.2] random: crng init done\r\n" +
	"VMR|## passwd\r\n" +
	"VMR|root:x:0:0:root:/root:/bin/bash\r\n" +
	"VMR|alice:x:1000:1000:Alice Admin,,,:/home/alice:/bin/bash\r\n" +
	"VMR|## group\r\n" +
	"VMR|sudo:x:27:alice,bob\r\n" +
	"VMR|adm:x:4:\r\n" +
	"VMR|## file /srv/app/env 600 deploy deploy regular file\r\n" +
	"VMR|LISTEN=:8080\r\n" +
	"VMR|## file /srv/app 755 root root directory\r\n" +
	"VMR|## units\r\n" +
	"VMR|Id=nginx.service UnitFileState=enabled ActiveState=active SubState=running Result=success DropInPaths=/etc/systemd/system/nginx.service.d/10-restart.conf /run/x.conf \r\n" +
	"-----END VMINIT GUEST REPORT-----\r\n" +
	"[   41.0] reboot: Power down\r\n"

func TestParseReport(t *testing.T) {
	r, err := ParseReport([]byte(console))
	if err != nil {
		t.Fatal(err)
	}
	if r.Agent() != "cloud-init" || r.Boot() != 2 || r.Text("hostname") != "web-1" {
		t.Errorf("agent %q boot %d hostname %q", r.Agent(), r.Boot(), r.Text("hostname"))
	}
	u, ok := r.User("alice")
	if want := (User{"alice", "1000", "1000", "Alice Admin,,,", "/home/alice", "/bin/bash"}); !ok || u != want {
		t.Errorf("alice = %+v, want %+v", u, want)
	}
	if m, ok := r.GroupMembers("sudo"); !ok || !reflect.DeepEqual(m, []string{"alice", "bob"}) {
		t.Errorf("sudo members %q", m)
	}
	if m, ok := r.GroupMembers("adm"); !ok || m != nil {
		t.Errorf("adm members %q", m)
	}
	if _, ok := r.GroupMembers("wheel"); ok {
		t.Error("wheel found")
	}
	f, ok := r.File("/srv/app/env")
	if want := (File{"/srv/app/env", "600", "deploy", "deploy", "regular file", "LISTEN=:8080\n"}); !ok || f != want {
		t.Errorf("file = %+v, want %+v", f, want)
	}
	if d, ok := r.File("/srv/app"); !ok || d.Type != "directory" || d.Content != "" {
		t.Errorf("dir = %+v", d)
	}
	p, ok := r.Unit("nginx.service")
	if !ok || p["ActiveState"] != "active" || p["DropInPaths"] != "/etc/systemd/system/nginx.service.d/10-restart.conf /run/x.conf" {
		t.Errorf("unit = %q", p)
	}
}

func TestParseReportWantsAComplete(t *testing.T) {
	if _, err := ParseReport([]byte("-----BEGIN VMINIT GUEST REPORT-----\nVMR|## boot 1\n")); err == nil {
		t.Error("a cut report parsed")
	}
}

func ExampleParseReport() {
	console := "-----BEGIN VMINIT GUEST REPORT-----\n" +
		"VMR|## hostname\nVMR|dev\n" +
		"VMR|## file /etc/motd 644 root root regular file\nVMR|hello\n" +
		"-----END VMINIT GUEST REPORT-----\n"
	r, err := ParseReport([]byte(console))
	if err != nil {
		panic(err)
	}
	motd, _ := r.File("/etc/motd")
	fmt.Printf("%s %s %q\n", r.Text("hostname"), motd.Mode, motd.Content)
	// Output: dev 644 "hello\n"
}

// storageConsole is the storage part of a report as the Ignition guest
// prints it (lsblk -J -b, swapon --show), a kernel message among it.
const storageConsole = "-----BEGIN VMINIT GUEST REPORT-----\r\n" +
	"VMR|## lsblk\r\n" +
	`VMR|{"blockdevices": [{"name": "vda", "path": "/dev/vda", "type": "disk", "size": 4370464768, "pttype": "gpt", "partlabel": null, "parttype": null, "fstype": null, "label": null, "uuid": null, "fssize": null, "mountpoint": null,` + "\r\n" +
	`VMR|  "children": [{"name": "vda1", "path": "/dev/vda1", "type": "part", "size": 4368350720, "pttype": "gpt", "partlabel": "root", "parttype": "0fc63daf-8483-4772-8e79-3d69d8477de4", "fstype": "ext4", "label": "vminit-root", "uuid": "5e1b9b4a-0d0c-4c57-8f41-8f1c7f0e0c11", "fssize": 4222570496, "mountpoint": "/"}]},` + "\r\n" +
	"[   12.3] EXT4-fs (vdb1): mounted filesystem\r\n" +
	`VMR| {"name": "vdb", "path": "/dev/vdb", "type": "disk", "size": 1073741824, "pttype": "gpt", "partlabel": null, "parttype": null, "fstype": null, "label": null, "uuid": null, "fssize": null, "mountpoint": null,` + "\r\n" +
	`VMR|  "children": [{"name": "vdb2", "path": "/dev/vdb2", "type": "part", "size": 67108864, "pttype": "gpt", "partlabel": "swap", "parttype": "0657fd6d-a4ab-43c4-84e5-0933c84b4f4f", "fstype": "swap", "label": "swap", "uuid": "0b3e", "fssize": null, "mountpoint": "[SWAP]"}]}]}` + "\r\n" +
	"VMR|## swaps\r\n" +
	"VMR|/dev/vdb2 partition 67104768\r\n" +
	"-----END VMINIT GUEST REPORT-----\r\n"

func TestReportStorage(t *testing.T) {
	r, err := ParseReport([]byte(storageConsole))
	if err != nil {
		t.Fatal(err)
	}
	devs, err := r.BlockDevices()
	if err != nil || len(devs) != 2 {
		t.Fatalf("block devices %+v, %v", devs, err)
	}
	root, ok := r.BlockDevice("/dev/vda1")
	if !ok || root.PartLabel != "root" || root.FSType != "ext4" || root.Label != "vminit-root" || root.FSSize != 4222570496 || root.MountPoint != "/" {
		t.Errorf("root = %+v", root)
	}
	swap, ok := r.BlockDevice("/dev/vdb2")
	if !ok || swap.PartType != "0657fd6d-a4ab-43c4-84e5-0933c84b4f4f" || swap.Size != 64<<20 || swap.MountPoint != "[SWAP]" || swap.FSSize != 0 {
		t.Errorf("swap partition = %+v", swap)
	}
	if disk, ok := r.BlockDevice("/dev/vdb"); !ok || disk.PTType != "gpt" || len(disk.Children) != 1 {
		t.Errorf("disk = %+v", disk)
	}
	if _, ok := r.BlockDevice("/dev/vdc"); ok {
		t.Error("/dev/vdc found")
	}
	if got, want := r.Swaps(), []Swap{{"/dev/vdb2", "partition", 67104768}}; !reflect.DeepEqual(got, want) {
		t.Errorf("swaps %+v, want %+v", got, want)
	}
	// A report of a guest built before storage was reported says so.
	old, _ := ParseReport([]byte(console))
	if _, err := old.BlockDevices(); err == nil || !strings.Contains(err.Error(), "no lsblk section") {
		t.Errorf("a report without lsblk: %v", err)
	}
}
