package qemutest

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

func TestCPIOReadableByCpio(t *testing.T) {
	cpio, err := exec.LookPath("cpio")
	if err != nil {
		t.Skip("cpio not installed")
	}
	var b bytes.Buffer
	c := newCPIOWriter(&b)
	c.Dir("bin", 0o755)
	c.File("bin/hello", 0o755, []byte("hi\n"))
	c.Symlink("bin/sh", "hello")
	c.CharDev("console", 0o600, 5, 1)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if b.Len()%4 != 0 {
		t.Errorf("archive length %d not 4-aligned", b.Len())
	}
	cmd := exec.Command(cpio, "-t", "-v", "--quiet")
	cmd.Stdin = &b
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cpio -t: %v\n%s", err, out)
	}
	for _, want := range []string{"drwxr-xr-x", "bin/hello", "bin/sh -> hello", "crw-------", "console"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("cpio -tv output lacks %q:\n%s", want, out)
		}
	}
}

func TestParseRecords(t *testing.T) {
	out := "noise\r\nM BEGIN entry dXNlci1kYXRh 0 81a4 3\r\naGkK\r\nM END 0\r\nM BEGIN done - 0\nM END 0\n"
	recs, err := parseRecords([]byte(out), "M")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Name != "user-data" || string(recs[0].Data) != "hi\n" ||
		len(recs[0].Fields) != 3 || recs[1].Kind != "done" || recs[1].Name != "" {
		t.Fatalf("got %+v", recs)
	}
	if _, err := parseRecords([]byte("M BEGIN x - \naGkK\n"), "M"); err == nil {
		t.Error("cut-off record accepted")
	}
}
