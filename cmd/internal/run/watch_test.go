package run

import (
	"fmt"
	"strings"
	"testing"
)

// feed runs a console transcript through a watcher and returns it with
// the progress lines it said.
func feed(agent, console string) (*watcher, []string) {
	var said []string
	w := &watcher{agent: agent, say: func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) }}
	s := &lineSplitter{fn: w.line}
	s.Write([]byte(strings.ReplaceAll(console, "\n", "\r\n")))
	s.flush()
	return w, said
}

// The transcripts are the shapes of Debian 12's console: the kernel,
// systemd's status lines, cloud-init's stderr through journal+console
// (prefixed cloud-init[PID]:) and its final message written straight to
// /dev/console; Ignition's journal forwarded to the console.
const (
	ciHead = `[    0.000000] Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14) 12.2.0) #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1
[    3.200000] systemd[1]: Starting cloud-init-local.service - Initial cloud-init job (pre-networking)...
[    8.100000] cloud-init[201]: Cloud-init v. 22.4.2 running 'init-local' at Wed, 25 Nov 2026 19:00:03 +0000. Up 8.05 seconds.
[   11.500000] cloud-init[290]: Cloud-init v. 22.4.2 running 'init' at Wed, 25 Nov 2026 19:00:07 +0000. Up 11.40 seconds.
[   20.000000] cloud-init[400]: Cloud-init v. 22.4.2 running 'modules:config' at Wed, 25 Nov 2026 19:00:15 +0000. Up 19.90 seconds.
[   25.000000] cloud-init[480]: Cloud-init v. 22.4.2 running 'modules:final' at Wed, 25 Nov 2026 19:00:20 +0000. Up 24.90 seconds.
`
	ciFinal = `Cloud-init v. 22.4.2 finished at Wed, 25 Nov 2026 19:00:31 +0000. Datasource DataSourceNoCloud [seed=/dev/sr0][dsmode=net].  Up 35.12 seconds
[` + "\x1b[0;32m  OK  \x1b[0m] Finished \x1b[0;1;39mcloud-final.service\x1b[0m" + ` - Execute cloud user/final scripts.
`
)

func TestWatcherCloudInit(t *testing.T) {
	w, said := feed(agentCloudInit, ciHead+ciFinal)
	if !w.done || !w.ok || len(w.errors) != 0 {
		t.Fatalf("a clean first boot: done %v ok %v errors %q", w.done, w.ok, w.errors)
	}
	want := []string{"kernel 6.1.0-28-amd64 booting", "cloud-init 22.4.2 started", "cloud-init stage init-local", "cloud-init stage init",
		"cloud-init stage modules:config", "cloud-init stage modules:final",
		"cloud-init 22.4.2 finished (guest up 35.12s, DataSourceNoCloud [seed=/dev/sr0][dsmode=net])"}
	if strings.Join(said, "\n") != strings.Join(want, "\n") {
		t.Errorf("progress:\n%s\nwant:\n%s", strings.Join(said, "\n"), strings.Join(want, "\n"))
	}

	w, _ = feed(agentCloudInit, ciHead+
		"[   26.000000] cloud-init[480]: 2026-11-25 19:00:21,000 - cc_locale.py[WARNING]: Failed to run locale-gen\n"+
		"[   26.100000] cloud-init[480]: 2026-11-25 19:00:21,100 - util.py[WARNING]: Running module locale (<module 'cloudinit.config.cc_locale'>) failed\n"+
		ciFinal)
	if !w.done || w.ok || len(w.errors) != 1 || w.errors[0] != "util.py[WARNING]: Running module locale (<module 'cloudinit.config.cc_locale'>) failed" || len(w.warnings) != 1 {
		t.Errorf("module failures: done %v ok %v errors %q", w.done, w.ok, w.errors)
	}

	// cloud-init's other warnings are warnings, as in its own status.
	w, said = feed(agentCloudInit, ciHead+
		"[  141.390449] cloud-init[402]: 2026-11-25 19:50:06,529 - activators.py[WARNING]: Running ['ifup', 'ens3'] resulted in stderr output: ifup: interface ens3 already configured\n"+
		"[  141.5] cloud-init[402]: 2026-11-25 19:50:06,600 - util.py[ERROR]: something broke\n"+ciFinal)
	if !w.done || w.ok || len(w.warnings) != 1 || !strings.HasPrefix(w.warnings[0], "activators.py[WARNING]: Running ['ifup'") ||
		len(w.errors) != 1 || w.errors[0] != "util.py[ERROR]: something broke" || !strings.Contains(strings.Join(said, "\n"), "cloud-init warning: activators.py") {
		t.Errorf("a warning and an error: ok %v, warnings %q, errors %q", w.ok, w.warnings, w.errors)
	}
	w, _ = feed(agentCloudInit, ciHead+
		"[   26.0] cloud-init[480]: 2026-11-25 19:00:21,000 - main.py[WARNING]: failed stage init\n"+ciFinal)
	if w.ok || len(w.errors) != 1 {
		t.Errorf("a failed stage: ok %v, errors %q", w.ok, w.errors)
	}

	w, _ = feed(agentCloudInit, ciHead+"[   30.000000] cloud-init[480]: 2026-11-25 19:00:21,000 - cc_final_message.py[WARNING]: Used fallback datasource\n"+
		"Cloud-init v. 22.4.2 finished at Wed, 25 Nov 2026 19:00:31 +0000. Datasource DataSourceNone.  Up 35.12 seconds\n")
	if !w.done || w.ok || !strings.Contains(strings.Join(w.errors, "\n"), "found no datasource") {
		t.Errorf("no datasource: done %v ok %v errors %q", w.done, w.ok, w.errors)
	}

	// A user's final_message replaces the default: systemd's line ends it.
	w, _ = feed(agentCloudInit, ciHead+"all done, my way\n[\x1b[0;32m  OK  \x1b[0m] Finished \x1b[0;1;39mcloud-final.service\x1b[0m - Execute cloud user/final scripts.\n")
	if !w.done || !w.ok {
		t.Errorf("custom final message: done %v ok %v", w.done, w.ok)
	}
	w, _ = feed(agentCloudInit, ciHead+"[FAILED] Failed to start cloud-final.service - Execute cloud user/final scripts.\n")
	if !w.done || w.ok {
		t.Errorf("cloud-final failed: done %v ok %v", w.done, w.ok)
	}
	// Nothing from cloud-init: not done.
	w, _ = feed(agentCloudInit, "[    0.000000] Linux version 6.1.0\n[  OK  ] Finished cloud-final.service\n")
	if w.done {
		t.Error("systemd's line before cloud-init started ended the wait")
	}
}

const ignHead = `[    0.000000] Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org) #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1
[    4.000000] ignition[312]: Ignition Debian 2.14.0+ds1-1+b6
[    4.010000] ignition[312]: Stage: fetch-offline
[    4.020000] ignition[312]: reading system config file "/usr/lib/ignition/base.ign"
[    4.100000] ignition[312]: parsing config with SHA512: 3c1b...
[    4.200000] ignition[312]: Ignition finished successfully
[    6.000000] ignition[340]: Ignition Debian 2.14.0+ds1-1+b6
[    6.010000] ignition[340]: Stage: files
[    6.500000] ignition[340]: files: createFilesystemsFiles: createFiles: op(1): [started]  writing file "/sysroot/etc/hostname"
`

func TestWatcherIgnition(t *testing.T) {
	w, said := feed(agentIgnition, ignHead+"[    7.000000] ignition[340]: Ignition finished successfully\n"+
		"[\x1b[0;32m  OK  \x1b[0m] Reached target \x1b[0;1;39mignition-complete.target\x1b[0m - Ignition Complete.\n")
	if !w.done || !w.ok {
		t.Fatalf("a clean Ignition run: done %v ok %v errors %q", w.done, w.ok, w.errors)
	}
	if got := strings.Join(said, "|"); got != "kernel 6.1.0-28-amd64 booting|Ignition 2.14.0 started|Ignition stage fetch-offline|Ignition stage files|Ignition complete (ignition-complete.target)" {
		t.Errorf("progress: %s", got)
	}
	w, _ = feed(agentIgnition, ignHead+`[    7.000000] ignition[340]: CRITICAL : Ignition failed: failed to create files: failed to resolve user "core"
[FAILED] Failed to start ignition-files.service - Ignition (files).
[    7.200000] systemd[1]: Entering emergency mode. Exit the shell to continue.
`)
	if !w.done || w.ok || len(w.errors) != 2 || !strings.HasPrefix(w.errors[0], `Ignition failed: failed to create files: failed to resolve user "core"`) {
		t.Errorf("a failed stage: done %v ok %v errors %q", w.done, w.ok, w.errors)
	}
}

func TestWatcherPanic(t *testing.T) {
	w, _ := feed(agentCloudInit, "[    2.0] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\n")
	if !w.done || w.ok || w.errors[0] != "kernel panic: VFS: Unable to mount root fs on unknown-block(0,0)" {
		t.Errorf("panic: %+v", w)
	}
}

func TestRingKeepsTheEnd(t *testing.T) {
	r := ring{max: 10}
	for i := 0; i < 100; i++ {
		r.Write([]byte(fmt.Sprintf("%d,", i)))
	}
	if got := string(r.Bytes()); got != ",97,98,99," || len(r.buf) > 2*r.max {
		t.Errorf("ring = %q (holding %d bytes)", got, len(r.buf))
	}
	r.Write([]byte("0123456789abcdef"))
	if got := string(r.Bytes()); got != "6789abcdef" {
		t.Errorf("after a long write: %q", got)
	}
}

func TestLineSplitterBoundsLines(t *testing.T) {
	var lines []string
	s := &lineSplitter{fn: func(l string) { lines = append(lines, l) }}
	s.Write([]byte("a\nb"))
	s.Write([]byte(strings.Repeat("x", 2*maxLine)))
	s.Write([]byte("y\nc\n"))
	if len(lines) != 3 || lines[0] != "a" || len(lines[1]) != maxLine || lines[2] != "c" {
		t.Errorf("lines: %d, first %q, last %q", len(lines), lines[0], lines[len(lines)-1])
	}
}

func TestTailShowsTheLastLines(t *testing.T) {
	if got := tail([]byte("1\r\n2\r\n3\x1b[0m\x07\r\n"), 2); got != "2\n3?" {
		t.Errorf("tail = %q", got)
	}
}

// TestGuestEscapesNeverReachTheTerminal: what the guest prints is shown in
// progress lines, errors, warnings and the console tail; its OSC (window
// title, clipboard), DCS and C1 sequences, and any control character, are
// removed or made visible there, not passed to the user's terminal.
func TestGuestEscapesNeverReachTheTerminal(t *testing.T) {
	const (
		osc = "\x1b]0;owned\x07\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x1b\\"
		dcs = "\x1bP$q\"p\x1b\\"
		c1  = "\u009b31m\u009d0;t\u009c"
	)
	console := "[    0.0] Linux version 6.1" + osc + "-hostile (x)\n" +
		"[   30.0] cloud-init[9]: 2026-11-25 19:00:10,000 - util.py[WARNING]: look " + osc + dcs + c1 + " here\n" +
		"[   31.0] cloud-init[9]: 2026-11-25 19:00:11,000 - util.py[ERROR]: broken " + dcs + "\x1b]0;unterminated\n"
	_, said := feed(agentCloudInit, console)
	w, _ := feed(agentCloudInit, console)
	ign, ignSaid := feed(agentIgnition, "Ignition failed: "+osc+"bad\n")
	shown := strings.Join(append(append(append(said, ignSaid...), w.errors...), append(w.warnings, ign.errors...)...), "\n") +
		"\n" + tail([]byte(console), 10)
	if strings.ContainsAny(shown, "\x1b\x07\u009b\u009c\u009d") {
		t.Errorf("escape or control characters shown:\n%q", shown)
	}
	for _, want := range []string{"kernel 6.1-hostile booting", "util.py[WARNING]: look ?31m?0;t? here", "util.py[ERROR]: broken", "Ignition failed: bad"} {
		if !strings.Contains(shown, want) {
			t.Errorf("%q not shown:\n%q", want, shown)
		}
	}
}
