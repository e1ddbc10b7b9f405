package qemutest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/lib/qemu"
	"github.com/vminit/vminit/internal/testing/guesttest"
	"github.com/vminit/vminit/internal/testing/testtools"
)

// DefaultKernelDir is where scripts/install-test-kernel.sh puts the kernel
// unless VMINIT_TEST_KERNEL_DIR says otherwise.
const DefaultKernelDir = "/var/cache/vminit-test-kernel"

const (
	// DefaultTimeout bounds one boot, from starting QEMU to its exit.
	DefaultTimeout = 120 * time.Second
	// MaxOutput caps what a boot may write to each serial port.
	MaxOutput = 16 << 20
)

// Machine describes one boot.
type Machine struct {
	// CDROMs are images attached read-only as SCSI CD-ROMs (virtio-scsi,
	// target N for CDROMs[N]; the script finds the node with "qt_cdrom N").
	CDROMs []string
	// Disks are raw images attached read-only as virtio disks (serial
	// "qtdiskN"; the script finds the node with "qt_disk N").
	Disks []string
	// FwCfg maps fw_cfg names (e.g. "opt/com.coreos/config") to host files;
	// the guest sees them in /sys/firmware/qemu_fw_cfg/by_name/<name>/raw.
	FwCfg map[string]string
	// Script is a busybox sh script run as root after the modules are loaded.
	// It reports results with the qt_* helpers (see the package doc); its
	// stdout and stderr go to the console log.
	Script string
	// Timeout bounds the boot; zero means DefaultTimeout.
	Timeout time.Duration
	// MemoryMiB is the guest's RAM; zero means 256.
	MemoryMiB int
}

// Record is one framed result the guest script emitted with qt_emit.
type Record struct {
	Kind   string   // the first qt_emit argument, e.g. "entry", "fwcfg"
	Name   string   // the second
	Fields []string // the rest
	Data   []byte   // the decoded standard input (or file)
	Status int      // exit status of the guest's reader; non-zero means a read error
}

// Result is what a boot produced.
type Result struct {
	Records  []Record
	Console  []byte        // the kernel console (ttyS0): kernel log and script output
	Kernel   string        // uname -r of the guest
	Duration time.Duration // wall time of the boot
}

// Find returns the first record of the kind and name, or nil.
func (r *Result) Find(kind, name string) *Record {
	for i := range r.Records {
		if r.Records[i].Kind == kind && r.Records[i].Name == name {
			return &r.Records[i]
		}
	}
	return nil
}

// ConsoleTail returns the last n lines of the console log, for messages.
func (r *Result) ConsoleTail(n int) string {
	return tail(r.Console, n)
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(string(b), "\r", ""), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Kernel is an installed test kernel.
type Kernel struct {
	Dir     string   // the directory install-test-kernel.sh filled
	Image   string   // Dir/vmlinux (PVH boot, fast) if present, else Dir/vmlinuz
	Modules []string // module files in load order
	Version string   // the VERSION stamp
}

// FindKernel locates the test kernel (VMINIT_TEST_KERNEL_DIR, else
// DefaultKernelDir). When it is missing the test is skipped, or failed under
// CI (see testtools.Missing).
func FindKernel(t testing.TB) *Kernel {
	t.Helper()
	dir := os.Getenv("VMINIT_TEST_KERNEL_DIR")
	if dir == "" {
		dir = DefaultKernelDir
	}
	// The decompressed ELF kernel boots through its PVH entry point and
	// saves the ~15 s that decompressing the bzImage takes under TCG.
	k := &Kernel{Dir: dir, Image: filepath.Join(dir, "vmlinux")}
	if _, err := os.Stat(k.Image); err != nil {
		k.Image = filepath.Join(dir, "vmlinuz")
	}
	load, err := os.ReadFile(filepath.Join(dir, "modules.load"))
	if err == nil {
		_, err = os.Stat(k.Image)
	}
	if err != nil {
		testtools.Missing(t, "test kernel not installed in "+dir+" (scripts/install-test-kernel.sh)")
		return nil
	}
	for _, m := range strings.Fields(string(load)) {
		k.Modules = append(k.Modules, filepath.Join(dir, "modules", m))
	}
	v, _ := os.ReadFile(filepath.Join(dir, "VERSION"))
	k.Version = strings.TrimSpace(string(v))
	return k
}

// findBusybox returns a statically linked busybox, which the initramfs needs.
func findBusybox(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		static := true
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				static = false
			}
		}
		f.Close()
		if static {
			return p
		}
	}
	testtools.Missing(t, "a statically linked /bin/busybox (package busybox-static) not found")
	return ""
}

// Run boots the test kernel under qemu-system-x86_64 with the machine's
// media attached, runs its script and returns the records it emitted. It
// skips the test (fails under CI) when QEMU, busybox or the kernel is missing.
// The error is non-nil when the boot did not complete (timeout, crash, output
// cap) or the guest reported a failure with qt_error; it includes the end of
// the console log. Everything is written under t.TempDir(), and QEMU is killed
// on timeout and at test cleanup.
func Run(t testing.TB, m Machine) (*Result, error) {
	t.Helper()
	qemuBin := testtools.Require(t, "qemu-system-x86_64")
	busybox := findBusybox(t)
	k := FindKernel(t)
	if qemuBin == "" || busybox == "" || k == nil {
		return nil, errors.New("qemutest: missing qemu, busybox or the test kernel")
	}
	dir := t.TempDir()

	var nonce [8]byte
	rand.Read(nonce[:])
	mark := "QEMUTEST-" + hex.EncodeToString(nonce[:])

	initrd := filepath.Join(dir, "initrd.cpio")
	if err := writeInitramfs(initrd, busybox, k, strings.ReplaceAll(initScript, "@MARK@", mark), m.Script); err != nil {
		return nil, err
	}

	timeout := m.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	mem := m.MemoryMiB
	if mem == 0 {
		mem = 256
	}
	args := []string{
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-machine", "pc", "-m", strconv.Itoa(mem), "-smp", "1",
		"-nic", "none",
		"-kernel", k.Image, "-initrd", initrd,
		"-append", "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init " + guesttest.NoTimerCheck,
		// Kernel console and data channel: the pipes passed as fd 3 and 4.
		"-serial", "file:/dev/fd/3", "-serial", "file:/dev/fd/4",
	}
	args = append(args, accelArgs(qemuBin)...)
	if len(m.CDROMs) > 0 {
		args = append(args, "-device", "virtio-scsi-pci,id=scsi0")
		for i, img := range m.CDROMs {
			args = append(args,
				"-drive", fmt.Sprintf("if=none,id=cd%d,file=%s,format=raw,media=cdrom,readonly=on", i, qemuEscape(img)),
				"-device", fmt.Sprintf("scsi-cd,bus=scsi0.0,drive=cd%d,scsi-id=%d,lun=0", i, i))
		}
	}
	for i, img := range m.Disks {
		args = append(args,
			"-drive", fmt.Sprintf("if=none,id=disk%d,file=%s,format=raw,readonly=on", i, qemuEscape(img)),
			"-device", fmt.Sprintf("virtio-blk-pci,drive=disk%d,serial=qtdisk%d", i, i))
	}
	names := make([]string, 0, len(m.FwCfg))
	for name := range m.FwCfg {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		args = append(args, "-fw_cfg", fmt.Sprintf("name=%s,file=%s", qemuEscape(name), qemuEscape(m.FwCfg[name])))
	}

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemuBin, args...)
	cmd.Dir = dir
	var qemuOut cappedBuffer
	qemuOut.max = 1 << 20
	cmd.Stdout = &qemuOut
	cmd.Stderr = &qemuOut
	conR, conW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	dataR, dataW, err := os.Pipe()
	if err != nil {
		conR.Close()
		conW.Close()
		return nil, err
	}
	cmd.ExtraFiles = []*os.File{conW, dataW}
	cmd.WaitDelay = 5 * time.Second

	start := time.Now()
	err = cmd.Start()
	conW.Close()
	dataW.Close()
	if err != nil {
		conR.Close()
		dataR.Close()
		return nil, fmt.Errorf("qemutest: starting qemu: %w", err)
	}
	var once sync.Once
	kill := func() { once.Do(func() { cmd.Process.Kill() }) }
	t.Cleanup(kill)

	var console, data cappedBuffer
	console.max, data.max = MaxOutput, MaxOutput
	console.onOverflow, data.onOverflow = kill, kill
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); io.Copy(&console, conR); conR.Close() }()
	go func() { defer wg.Done(); io.Copy(&data, dataR); dataR.Close() }()
	waitErr := cmd.Wait()
	wg.Wait()

	res := &Result{Console: console.Bytes(), Duration: time.Since(start)}
	os.WriteFile(filepath.Join(dir, "console.log"), res.Console, 0o644)
	os.WriteFile(filepath.Join(dir, "data.log"), data.Bytes(), 0o644)

	fail := func(format string, a ...any) (*Result, error) {
		msg := fmt.Sprintf(format, a...)
		if s := strings.TrimSpace(qemuOut.String()); s != "" {
			msg += "\nqemu: " + s
		}
		return res, fmt.Errorf("qemutest: %s\n--- console (last 40 lines) ---\n%s", msg, res.ConsoleTail(40))
	}
	recs, perr := parseRecords(data.Bytes(), mark)
	res.Records = recs
	switch {
	case ctx.Err() != nil:
		return fail("boot timed out after %v", timeout)
	case console.overflow || data.overflow:
		return fail("guest output exceeds %d bytes", MaxOutput)
	case waitErr != nil:
		return fail("qemu: %v", waitErr)
	case perr != nil:
		return fail("%v", perr)
	}
	done := res.Find("done", "")
	if done == nil {
		return fail("guest did not finish its script (no done record)")
	}
	res.Kernel = strings.TrimSpace(string(done.Data))
	var errs []string
	for _, r := range recs {
		if r.Kind == "error" {
			errs = append(errs, strings.TrimSpace(string(r.Data)))
		}
	}
	if len(errs) > 0 {
		return fail("guest reported errors:\n%s", strings.Join(errs, "\n---\n"))
	}
	if len(done.Fields) > 0 && done.Fields[0] != "0" {
		return fail("guest script exited with status %s", done.Fields[0])
	}
	return res, nil
}

// MustRun is Run that fails the test on error.
func MustRun(t testing.TB, m Machine) *Result {
	t.Helper()
	r, err := Run(t, m)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// accelArgs is how QEMU runs guests on this machine: KVM when it really
// starts a guest here, TCG otherwise (the rule is package qemu's, shared
// with vminit run; VMINIT_QEMU_NO_KVM=1 forces TCG).
func accelArgs(qemuPath string) []string {
	a, _ := qemu.Accel(qemuPath, "auto")
	return a
}

// qemuEscape doubles commas, QEMU's escape inside option values.
var qemuEscape = qemu.Escape

// Initramfs writes, under t.TempDir(), an initramfs for a test that boots
// the test kernel with its own QEMU command line (vminit run's tests):
// its /init mounts /proc, /sys and /dev, loads the kernel's modules, runs
// script with busybox sh, its output on the console, and powers off. It
// returns the path, or "" when busybox or the kernel is missing (the test
// is then skipped, or failed under CI).
func Initramfs(t testing.TB, script string) string {
	t.Helper()
	busybox := findBusybox(t)
	k := FindKernel(t)
	if busybox == "" || k == nil {
		return ""
	}
	path := filepath.Join(t.TempDir(), "initrd.cpio")
	if err := writeInitramfs(path, busybox, k, plainInitScript, script); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeInitramfs(path, busybox string, k *Kernel, init, script string) error {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	c := newCPIOWriter(f)
	for _, d := range []string{"bin", "dev", "lib", "lib/modules", "mnt", "proc", "sys", "tmp"} {
		if err := c.Dir(d, 0o755); err != nil {
			return err
		}
	}
	// The kernel opens /dev/console before /init runs and devtmpfs is mounted.
	if err := c.CharDev("dev/console", 0o600, 5, 1); err != nil {
		return err
	}
	if err := c.File("bin/busybox", 0o755, bb); err != nil {
		return err
	}
	if err := c.Symlink("bin/sh", "busybox"); err != nil {
		return err
	}
	var load []string
	for _, m := range k.Modules {
		b, err := os.ReadFile(m)
		if err != nil {
			return err
		}
		name := filepath.Base(m)
		load = append(load, name)
		if err := c.File("lib/modules/"+name, 0o644, b); err != nil {
			return err
		}
	}
	if err := c.File("lib/modules.load", 0o644, []byte(strings.Join(load, "\n")+"\n")); err != nil {
		return err
	}
	if err := c.File("init", 0o755, []byte(init)); err != nil {
		return err
	}
	if err := c.File("script.sh", 0o644, []byte(script+"\n")); err != nil {
		return err
	}
	if err := c.Close(); err != nil {
		return err
	}
	return f.Close()
}

// parseRecords extracts the framed records from the data channel. Lines
// outside records are ignored; a record cut off by the end of output is an
// error.
func parseRecords(out []byte, mark string) ([]Record, error) {
	var recs []Record
	var cur *Record
	var body strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	begin, end := mark+" BEGIN ", mark+" END"
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case strings.HasPrefix(line, begin):
			if cur != nil {
				return recs, fmt.Errorf("record %s %q not ended before the next", cur.Kind, cur.Name)
			}
			f := strings.Fields(strings.TrimPrefix(line, begin))
			if len(f) < 2 {
				return recs, fmt.Errorf("bad record header %q", line)
			}
			cur = &Record{Kind: f[0], Fields: f[2:]}
			if f[1] != "-" {
				n, err := base64.StdEncoding.DecodeString(f[1])
				if err != nil {
					return recs, fmt.Errorf("bad record name in %q: %v", line, err)
				}
				cur.Name = string(n)
			}
			body.Reset()
		case strings.HasPrefix(line, end) && cur != nil:
			st := strings.TrimSpace(strings.TrimPrefix(line, end))
			if st != "" {
				cur.Status, _ = strconv.Atoi(st)
			}
			d, err := base64.StdEncoding.DecodeString(body.String())
			if err != nil {
				return recs, fmt.Errorf("record %s %q: bad base64: %v", cur.Kind, cur.Name, err)
			}
			cur.Data = d
			recs = append(recs, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(strings.TrimSpace(line))
		}
	}
	if err := sc.Err(); err != nil {
		return recs, err
	}
	if cur != nil {
		return recs, fmt.Errorf("record %s %q cut off", cur.Kind, cur.Name)
	}
	return recs, nil
}

// cappedBuffer keeps at most max bytes and calls onOverflow once past it.
type cappedBuffer struct {
	mu         sync.Mutex
	buf        bytes.Buffer
	max        int
	overflow   bool
	onOverflow func()
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - c.buf.Len(); len(p) > room {
		c.buf.Write(p[:max(room, 0)])
		if !c.overflow {
			c.overflow = true
			if c.onOverflow != nil {
				go c.onOverflow()
			}
		}
		return len(p), nil
	}
	return c.buf.Write(p)
}

func (c *cappedBuffer) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf.Bytes())
}

func (c *cappedBuffer) String() string { return string(c.Bytes()) }
