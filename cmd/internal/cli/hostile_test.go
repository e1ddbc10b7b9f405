package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testing/testtools"
)

// runWithin is run, failing the test if the command has not returned in
// 20 s (each of these returns in milliseconds unless it blocks).
func runWithin(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errOut := run(t, args...)
		done <- result{code, out, errOut}
	}()
	select {
	case r := <-done:
		return r.code, r.stdout, r.stderr
	case <-time.After(20 * time.Second):
		t.Fatalf("vminit %v blocked", args)
		return 0, "", ""
	}
}

// TestFIFOsFailAtOnce: a FIFO given as a spec, as an image to inspect or
// as a spec's source file is an error at once, not a command that hangs.
func TestFIFOsFailAtOnce(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	withSource := filepath.Join(dir, "spec.yaml")
	os.WriteFile(withSource, []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: a}\nspec:\n  files:\n    - path: /etc/x\n      source: {file: fifo.yaml}\n"), 0o600)
	out := filepath.Join(dir, "seed.iso")
	for _, args := range [][]string{
		{"build", fifo, "-o", out},
		{"validate", fifo},
		{"inspect", fifo},
		{"build", withSource, "-o", out},
	} {
		code, _, stderr := runWithin(t, args...)
		if code == ExitOK || !strings.Contains(stderr, "not a regular file") {
			t.Errorf("%v: exit %d %s", args, code, stderr)
		}
	}
}

// TestSourceFilesConfined: build refuses source files outside the spec's
// directory (absolute, .., /proc, links out of it) naming the field, and
// `instances put` uploads nothing when a spec names one.
func TestSourceFilesConfined(t *testing.T) {
	const secret = "S3CRET-FROM-THE-OPERATORS-ENVIRONMENT"
	t.Setenv("VMINIT_TEST_SECRET", secret)
	top := t.TempDir()
	dir := filepath.Join(top, "a", "b")
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(top, "x"), []byte(secret), 0o600)
	os.Symlink(filepath.Join(top, "x"), filepath.Join(dir, "link"))
	specWith := func(name, source string) string {
		p := filepath.Join(dir, name+".yaml")
		os.WriteFile(p, []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: "+name+"}\nspec:\n  files:\n    - path: /etc/x\n      source: {file: "+source+"}\n  metadataServer: {addresses: [192.0.2.7]}\n"), 0o600)
		return p
	}
	var mu sync.Mutex
	var uploads []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		uploads = append(uploads, r.Method+" "+r.URL.Path+" "+string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"name":"x","addresses":[],"revision":"r"}`)
	}))
	defer api.Close()
	tokenFile := filepath.Join(top, "token")
	os.WriteFile(tokenFile, []byte("token-0123456789abcdef\n"), 0o600)
	for i, source := range []string{"/etc/shadow", "../../x", "/proc/self/environ", "link", filepath.Join(top, "x")} {
		p := specWith("s"+strconv.Itoa(i), source)
		code, _, stderr := runWithin(t, "build", p, "-o", filepath.Join(top, "seed.iso"))
		if code != ExitInvalid || !strings.Contains(stderr, "spec.files[0].source.file: ") || !strings.Contains(stderr, "is outside "+dir) || strings.Contains(stderr, secret) {
			t.Errorf("build with source %s: exit %d %s", source, code, stderr)
		}
		code, _, stderr = runWithin(t, "instances", "put", p, "--server", api.URL, "--token-file", tokenFile)
		if code == ExitOK || !strings.Contains(stderr, "spec.files[0].source.file") {
			t.Errorf("instances put with source %s: exit %d %s", source, code, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(top, "seed.iso")); err == nil {
		t.Error("a refused build wrote its output")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, u := range uploads {
		if strings.Contains(u, secret) || strings.HasPrefix(u, "PUT") {
			t.Errorf("uploaded: %.200s", u)
		}
	}
}

// TestServeRefusesWhatIsNotAVMs: without --allow-loopback-instances, a
// spec claiming a loopback address is refused at load with a log line
// saying why, and a key file inside the spec directory stops serve from
// starting.
func TestServeRefusesWhatIsNotAVMs(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "lo.yaml"), []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: lo}\nspec:\n  metadataServer: {addresses: [127.0.0.1]}\n"), 0o600)
	token := filepath.Join(dir, "admin-token")
	os.WriteFile(token, []byte("token-0123456789abcdef\n"), 0o600)
	if l, err := serveUntil(t, listening, "--instances", dir, "--listen", freeAddr(t), "--admin-listen", freeAddr(t), "--admin-token-file", token); err == nil ||
		!strings.Contains(err.Error(), "--admin-token-file "+token+" is inside --instances") {
		t.Errorf("a token inside the spec directory: %v\n%s", err, l)
	}
	addr := freeAddr(t)
	var status int
	l, err := serveUntil(t, func(l string) bool {
		if !listening(l) {
			return false
		}
		if res, err := http.Get("http://" + addr + "/latest/meta-data/instance-id"); err == nil {
			status = res.StatusCode
			res.Body.Close()
		}
		return true
	}, "--instances", dir, "--listen", addr)
	if err != nil || status != 404 {
		t.Errorf("a loopback instance was served: %d, %v", status, err)
	}
	if !strings.Contains(l, "file=lo.yaml") || !strings.Contains(l, "spec.metadataServer.addresses[0]: 127.0.0.1 is a loopback address") {
		t.Errorf("the refusal is not logged:\n%s", l)
	}
}

func listening(stderr string) bool { return strings.Contains(stderr, "listening") }

// serveUntil runs `vminit serve --log-format text args...` until ready
// (called every 20 ms with what it logged) says what it waited for, then
// stops it as SIGTERM does (its context ends) and returns its log and
// error; at most 20 s in all.
func serveUntil(t *testing.T, ready func(stderr string) bool, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	root := NewRootCommand()
	stderr := &testtools.SyncBuffer{}
	root.SetErr(stderr)
	root.SetArgs(append([]string{"serve", "--log-format", "text"}, args...))
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	stopped := false
	for {
		select {
		case err := <-done:
			return stderr.String(), err
		case <-time.After(20 * time.Millisecond):
			if !stopped && ready(stderr.String()) {
				stopped = true
				cancel()
				select {
				case err := <-done:
					return stderr.String(), err
				case <-time.After(15 * time.Second):
					t.Fatalf("serve did not stop within 15 s of its context's end:\n%s", stderr)
				}
			}
		}
	}
}

// TestServeWithAFIFOSource: a spec in the directory store whose
// files[].source.file is a FIFO freezes nothing: the admin API stores an
// instance, a new spec file is picked up, and serve stops at once when
// told to.
func TestServeWithAFIFOSource(t *testing.T) {
	dir, work := t.TempDir(), t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := func(name, addr, files string) string {
		return "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: " + name + "}\nspec:\n" + files + "  metadataServer: {addresses: [" + addr + "]}\n"
	}
	os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(doc("a", "192.0.2.1", "  files:\n    - path: /etc/x\n      source: {file: fifo}\n")), 0o600)
	token := filepath.Join(work, "token")
	os.WriteFile(token, []byte("token-0123456789abcdef\n"), 0o600)
	put := filepath.Join(work, "b.yaml")
	os.WriteFile(put, []byte(doc("b", "192.0.2.2", "")), 0o600)
	adminAddr := freeAddr(t)
	step := 0
	l, err := serveUntil(t, func(l string) bool {
		switch {
		case step == 0 && listening(l):
			if code, out, errOut := run(t, "instances", "put", put, "--server", "http://"+adminAddr, "--token-file", token); code != ExitOK {
				t.Errorf("instances put: exit %d %s%s", code, out, errOut)
			}
			os.WriteFile(filepath.Join(dir, ".c"), []byte(doc("c", "192.0.2.3", "")), 0o600)
			os.Rename(filepath.Join(dir, ".c"), filepath.Join(dir, "c.yaml"))
			step = 1
		case step == 1:
			// The new file is served (the admin API lists what is served).
			code, _, _ := run(t, "instances", "get", "c", "--server", "http://"+adminAddr, "--token-file", token)
			return code == ExitOK
		}
		return false
	}, "--instances", dir, "--listen", freeAddr(t), "--admin-listen", adminAddr, "--admin-token-file", token)
	if err != nil {
		t.Errorf("serve: %v\n%s", err, l)
	}
	if !strings.Contains(l, "file=a.yaml") || !strings.Contains(l, "not a regular file (a FIFO)") {
		t.Errorf("the FIFO is not logged:\n%s", l)
	}
}

// TestValidateBounded: a 7.7 MB spec with 200,000 files is refused at the
// 10,000-entry limit, naming the field, with its allocations bounded (it
// took 3 GB and 17 s and was accepted before the limit, 1.3 GB before
// validate read plain specs without platform.Split's generic parse; the
// time is logged, not asserted).
func TestValidateBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: a}\nspec:\n  files:\n")
	for i := range 200_000 {
		b.WriteString("    - {path: /etc/f" + strconv.Itoa(i) + ", content: x}\n")
	}
	p := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	code, _, stderr := runWithin(t, "validate", p)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("validate of %d bytes, 200,000 files: exit %d in %v, %d MB allocated", b.Len(), code, took, alloc>>20)
	if code != ExitInvalid || !strings.Contains(stderr, "big.yaml:5: spec.files: more than 10000 entries, the limit of each list or mapping of a spec") {
		t.Errorf("exit %d %s", code, stderr)
	}
	if alloc > 1<<30 {
		t.Errorf("validate allocated %d MB; the bound is 1024", alloc>>20)
	}
}

// TestSysprepKeysThatAreNoFileName: a KubeVirt sysprep ConfigMap whose
// keys leave the disc's root is refused by build in every format and by
// render, naming the ConfigMap, the key and the field, and nothing is
// written, inside the output or outside it.
func TestSysprepKeysThatAreNoFileName(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "..", "platform", "testdata", "kubevirt-sysprep.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	top := t.TempDir()
	dir := filepath.Join(top, "a", "b")
	os.MkdirAll(dir, 0o700)
	objects := filepath.Join(dir, "vm.yaml")
	hostile := string(src) + "  ../../escape.txt: escaped\n  /abs.txt: absolute\n"
	os.WriteFile(objects, []byte(hostile), 0o600)
	for _, args := range [][]string{
		{"build", objects, "--fs", "dir", "-o", filepath.Join(dir, "out")},
		{"build", objects, "--fs", "tar", "-o", filepath.Join(dir, "out.tar")},
		{"build", objects, "-o", filepath.Join(dir, "out.iso")},
		{"build", objects, "-o", filepath.Join(dir, "out.img")},
		{"render", objects, "-o", filepath.Join(dir, "out")},
	} {
		code, _, stderr := runWithin(t, args...)
		for _, want := range []string{`sysprep.configMap.name`, `configmap "win-answers": key "../../escape.txt" has a ".." segment`, `key "/abs.txt" is absolute`} {
			if code != ExitInvalid || !strings.Contains(stderr, want) {
				t.Errorf("%v: exit %d, want 1 and %q in:\n%s", args, code, want, stderr)
			}
		}
	}
	for _, p := range []string{filepath.Join(top, "escape.txt"), filepath.Join(top, "a", "escape.txt"), "/abs.txt"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("wrote %s", p)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("wrote into %s: %v", dir, entries)
	}
}

// TestFIFOFlagsFailAtOnce: every file flag of serve, instances and build
// given a FIFO is an error at once naming the flag; none blocks start-up
// in an open that SIGTERM (the command's context ending) cannot end.
// vminit-server's --etcd-* flags: cmd/internal/servercmd.
func TestFIFOFlagsFailAtOnce(t *testing.T) {
	dir, work := t.TempDir(), t.TempDir()
	// The FIFO is made anew for each case: a blocked serve, once freed,
	// replaces its cache file by a regular one.
	fifo := filepath.Join(work, "fifo")
	token := filepath.Join(work, "token")
	os.WriteFile(token, []byte("token-0123456789abcdef\n"), 0o600)
	notPEM := filepath.Join(work, "not.pem")
	os.WriteFile(notPEM, []byte("x"), 0o600)
	vm := filepath.Join("..", "..", "..", "platform", "testdata", "kubevirt-sysprep.yaml")
	serve := func(more ...string) []string {
		return append([]string{"serve", "--instances", dir, "--listen", freeAddr(t), "--admin-listen", freeAddr(t), "--admin-token-file", token}, more...)
	}
	instances := func(more ...string) []string {
		return append([]string{"instances", "list", "--server", "https://127.0.0.1:1", "--token-file", token}, more...)
	}
	for _, c := range []struct {
		flag string
		args []string
	}{
		{"--instances-cache", serve("--instances-cache", fifo)},
		{"--admin-token-file", serve("--admin-token-file", fifo)},
		{"--hmac-key-file", serve("--hmac-key-file", fifo)},
		{"--token-key-file", serve("--token-key-file", fifo)},
		{"--admin-tls-cert", serve("--admin-tls-cert", fifo, "--admin-tls-key", notPEM)},
		{"--admin-tls-key", serve("--admin-tls-cert", notPEM, "--admin-tls-key", fifo)},
		{"--admin-client-ca", serve("--admin-tls-cert", notPEM, "--admin-tls-key", notPEM, "--admin-client-ca", fifo)},
		{"--token-file", instances("--token-file", fifo)},
		{"--ca-file", instances("--ca-file", fifo)},
		{"--cert", instances("--cert", fifo, "--key", notPEM)},
		{"--key", instances("--cert", notPEM, "--key", fifo)},
		{"--objects", []string{"build", vm, "--objects", fifo, "-o", filepath.Join(work, "seed.iso")}},
		{"--kubeconfig", []string{"build", vm, "--kubeconfig", fifo, "-o", filepath.Join(work, "seed.iso")}},
		{"--kubeconfig", []string{"instances", "list", "--kubeconfig", fifo}},
	} {
		os.Remove(fifo)
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		stderr, err := testtools.RunUntilStopped(t, NewRootCommand(), fifo, c.args...)
		msg := stderr
		if err != nil {
			msg += err.Error()
		}
		if err == nil || !strings.Contains(msg, c.flag) || !strings.Contains(msg, "FIFO") {
			t.Errorf("%s FIFO: err = %v, want one naming the flag and the FIFO; log:\n%s", c.flag, err, stderr)
		}
	}
}
