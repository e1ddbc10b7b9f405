package spec_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vminit/vminit/spec"
)

const sourceHeader = "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata:\n  name: src\nspec:\n  files:\n    - path: /etc/x\n      source: {file: %q}\n"

// sourceTree is top/{secret, shared/key, specs/{instance.yaml, ok.txt,
// out -> ../secret, env -> /proc/self/environ, fifo}}.
func sourceTree(t *testing.T) (top, specs string) {
	t.Helper()
	top = t.TempDir()
	specs = filepath.Join(top, "specs")
	for _, d := range []string{specs, filepath.Join(top, "shared")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, data := range map[string]string{"secret": "secret", "shared/key": "key", "specs/ok.txt": "ok"} {
		if err := os.WriteFile(filepath.Join(top, p), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../secret", filepath.Join(specs, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc/self/environ", filepath.Join(specs, "env")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(specs, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return top, specs
}

func loadSource(t *testing.T, l spec.Loader, specs, source string) (*spec.Instance, error) {
	t.Helper()
	p := filepath.Join(specs, "instance.yaml")
	if err := os.WriteFile(p, []byte(strings.Replace(sourceHeader, "%q", `"`+source+`"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var inst *spec.Instance
	var err error
	go func() { inst, err = l.Load(p); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("loading with source %s blocked", source)
	}
	return inst, err
}

// TestSourceFileConfined: a spec's source files come from its own
// directory unless a wider root is named; nothing reads /proc, a FIFO or a
// device, whatever the root.
func TestSourceFileConfined(t *testing.T) {
	top, specs := sourceTree(t)
	for _, c := range []struct {
		root, source, want string
	}{
		{"", "ok.txt", ""},
		{"", filepath.Join(specs, "ok.txt"), ""},
		{"", "../secret", "is outside " + specs},
		{"", filepath.Join(top, "secret"), "is outside"},
		{"", "/etc/shadow", "is outside"},
		{"", "/proc/self/environ", "is outside"},
		{"", "out", "is outside"},
		{"", "env", "is outside"},
		{"", "fifo", "not a regular file (a FIFO)"},
		{top, "../shared/key", ""},
		{top, "out", ""},
		{top, "../../etc/passwd", "is outside " + top},
		{"/", "/proc/self/environ", "not a regular file (a file of /proc)"},
		{"/", "env", "is outside"}, // os.Root refuses an absolute link target
		{"/", "/dev/zero", "not a regular file (a character device)"},
		{"/", "fifo", "not a regular file (a FIFO)"},
	} {
		_, err := loadSource(t, spec.Loader{SourceRoot: c.root}, specs, c.source)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("root %q source %s: %v", c.root, c.source, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), "spec.files[0].source.file: ") || !strings.Contains(err.Error(), c.want)):
			t.Errorf("root %q source %s: got %v, want %q", c.root, c.source, err, c.want)
		}
	}
}

// TestSpecFileNotRegular: a FIFO or device given as the spec is refused at
// once instead of blocking.
func TestSpecFileNotRegular(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "spec.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, "/dev/zero"} {
		done := make(chan error, 1)
		go func() { _, err := spec.Load(p); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("Load(%s): %v", p, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("Load(%s) blocked", p)
		}
	}
}

func TestMetadataServerAddresses(t *testing.T) {
	const doc = "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: a}\nspec:\n  metadataServer: {addresses: [%s]}\n"
	for _, c := range []struct{ addrs, want string }{
		{"192.0.2.10, '2001:db8::10', 127.0.0.2", ""},
		{"0.0.0.0", "spec.metadataServer.addresses[0]: 0.0.0.0 is the unspecified address, never the source"},
		{"192.0.2.1, '::'", "spec.metadataServer.addresses[1]: :: is the unspecified address"},
		{"255.255.255.255", "is the broadcast address"},
		{"224.0.0.1", "is a multicast address"},
		{"'ff02::1'", "is a multicast address"},
		{"'::ffff:0.0.0.0'", "is the unspecified address"},
	} {
		_, err := spec.Parse([]byte(strings.Replace(doc, "%s", c.addrs, 1)), "")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.addrs, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.addrs, err, c.want)
		}
	}
}

func TestOneDocument(t *testing.T) {
	const doc = "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: a}\n"
	for _, c := range []struct {
		doc, want string
	}{
		{doc, ""},
		{"---\n" + doc, ""},
		{"---\n" + doc + "---\n", ""},
		{doc + "---\n" + doc, "5: a second YAML document: a spec holds one Instance"},
		{doc + "---\nkind: Secret\n", "5: a second YAML document"},
		{doc + "---\n- x\n---\n", "5: a second YAML document"},
	} {
		_, err := spec.Parse([]byte(c.doc), "")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.doc, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: got %v, want %q", c.doc, err, c.want)
		}
	}
}

func TestListLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: a}\nspec:\n  files:\n")
	for i := range spec.MaxListEntries + 1 {
		b.WriteString("    - {path: /etc/f" + strconv.Itoa(i) + "}\n")
	}
	_, err := spec.Parse([]byte(b.String()), "")
	if err == nil || !strings.Contains(err.Error(), "5: spec.files: more than 10000 entries, the limit of each list or mapping of a spec") {
		t.Errorf("got %v", err)
	}
}

// TestNotASpecIsNotQuoted: a file that is no spec at all (a link to
// /etc/shadow or to a token dropped among spec files) is refused whole,
// without a word of its content; unknown keys of a spec are quoted, but
// bounded.
func TestNotASpecIsNotQuoted(t *testing.T) {
	const secret = "s3cr3t-T0KEN-value"
	for _, doc := range []string{
		"root:$6$" + secret + ":19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\nsshd:!:19000::::::\n",
		secret + "\n",
		"password: " + secret + "\n" + secret + ": 1\n",
		"- " + secret + "\n",
		"{\"token\": \"" + secret + "\"}",
	} {
		_, err := spec.Parse([]byte(doc), "")
		if err == nil || !strings.Contains(err.Error(), "not a vminit spec") || strings.Contains(err.Error(), secret[:6]) {
			t.Errorf("%q: %v", doc, err)
		}
	}
	long := strings.Repeat("k", 1000)
	_, err := spec.Parse([]byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: a}\n"+long+": 1\n\"x\\ny\": 2\n"), "")
	if err == nil || !strings.Contains(err.Error(), strings.Repeat("k", 64)+"…: unknown field") || len(err.Error()) > 1000 || !strings.Contains(err.Error(), `x\ny: unknown field`) {
		t.Errorf("long and control-character keys: %.300v", err)
	}
}

// TestDialects: imdsv2: required serves the instance through EC2 alone
// unless spec.metadataServer.dialects lists others; dialects are checked.
func TestDialects(t *testing.T) {
	const doc = "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: a}\nspec:\n  metadataServer: {addresses: [192.0.2.1]%s}\n"
	for _, c := range []struct {
		extra, want string
		serves      []string
	}{
		{"", "", spec.Dialects},
		{", imdsv2: required", "", []string{"ec2"}},
		{", imdsv2: required, dialects: [ec2, openstack]", "", []string{"ec2", "openstack"}},
		{", dialects: [nocloud]", "", []string{"nocloud"}},
		{", dialects: [gce, nocloud, nocloud]", "spec.metadataServer.dialects[0]: \"gce\": want one of ec2, openstack, nocloud, ignition", nil},
		{", dialects: [nocloud, nocloud]", "spec.metadataServer.dialects[1]: nocloud is already listed at spec.metadataServer.dialects[0]", nil},
	} {
		inst, err := spec.Parse([]byte(strings.Replace(doc, "%s", c.extra, 1)), "")
		if c.want != "" {
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: got %v, want %q", c.extra, err, c.want)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.extra, err)
		}
		var got []string
		for _, d := range spec.Dialects {
			if inst.Spec.MetadataServer.ServesDialect(d) {
				got = append(got, d)
			}
		}
		if strings.Join(got, ",") != strings.Join(c.serves, ",") {
			t.Errorf("%s: serves %v, want %v", c.extra, got, c.serves)
		}
	}
}
