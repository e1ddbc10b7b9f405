package guesttest

import (
	"fmt"
	"reflect"
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
