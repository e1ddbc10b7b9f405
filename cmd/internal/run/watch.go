package run

import (
	"fmt"
	"strings"
	"time"

	"github.com/vminit/vminit/internal/lib/lazyre"
)

// watcher reads the serial console line by line and follows the guest's
// first boot: the kernel starting, the agent starting, its stages, the
// errors it reports on the console and the line that says it finished.
// It is fed from one goroutine; it sends progress lines to say and its
// verdict once on done.
type watcher struct {
	agent string
	say   func(format string, a ...any)

	kernel   bool
	started  bool
	stage    string
	errors   []string
	warnings []string
	done     bool
	ok       bool
	summary  string // the agent's own final words (cloud-init's final message)
	panic    string // why the kernel panicked: nothing in the guest will answer
	said     map[string]bool
}

// The signals on the console, each from the agent's own code; compiled
// on first use (lazyre): every vminit run links them, only `run` reads a
// console.
var (
	// The kernel's first line.
	reKernel = lazyre.New(`Linux version (\S+)`)

	// cloud-init 22.4 cmd/main.py welcome(): "Cloud-init v. 22.4.2 running
	// 'init-local' at <time>. Up 5.12 seconds." (stderr, which the
	// cloud-init units send to journal+console).
	reCIRunning = lazyre.New(`Cloud-init v\. (\S+) running '([^']+)'`)
	// cc_final_message's default final_message: "Cloud-init v. 22.4.2
	// finished at <time>. Datasource DataSourceNoCloud [seed=/dev/sr0]
	// [dsmode=net].  Up 41.23 seconds".
	reCIFinished = lazyre.New(`Cloud-init v\. (\S+) finished at .*?Datasource (.*?)\.\s+Up ([0-9.]+) seconds`)
	// Its console log handler (cloud.cfg.d/05_logging.cfg) prints WARNING
	// and above as "<time> - <file>[<LEVEL>]: <message>". What cloud-init
	// itself counts as errors (status.json's, `cloud-init status`) are the
	// modules that fail and the stages that fail, both logged by
	// util.logexc at WARNING: "Running module X (<module ...>) failed"
	// (config/modules.py) and "failed stage X" (cmd/main.py); ERROR and
	// CRITICAL are errors too. Its other warnings (an ifup that printed on
	// stderr, a deprecated key) are warnings.
	reCILog   = lazyre.New(`- (\S+\.py)\[(WARNING|ERROR|CRITICAL)\]: (.*)`)
	reCIError = lazyre.New(`^Running module \S+ \(.*\) failed|^failed stage `)
	// systemd's status lines about the cloud-init units (the fallback
	// when the user's cloud-config replaced final_message).
	reCIUnitDone   = lazyre.New(`Finished (cloud-final\.service)`)
	reCIUnitFailed = lazyre.New(`Failed to start (cloud-\S+\.service)`)

	// Ignition logs "Ignition 2.14.0" and "Stage: fetch" at the start of
	// each stage and "Ignition finished successfully" at its end, or
	// "Ignition failed: <why>" (CRITICAL); systemd-journald forwards
	// them to the console (systemd.journald.forward_to_console=1).
	// (Debian's build says "Ignition Debian 2.14.0+ds1-1+b6".)
	reIgnVersion = lazyre.New(`Ignition (?:[A-Za-z]+ )?v?(\d+\.\d+\.\d+)`)
	reIgnStage   = lazyre.New(`Stage: (\S+)`)
	reIgnFailed  = lazyre.New(`Ignition failed: (.*)`)
	// The initramfs's systemd: ignition-complete.target is reached when
	// every stage succeeded; a failed stage unit sends it to emergency.
	reIgnComplete   = lazyre.New(`Reached target (ignition-complete\.target|Ignition Complete)`)
	reIgnUnitFailed = lazyre.New(`Failed to start (ignition-\S+\.service)|(ignition-\S+\.service): Failed with result`)
	reEmergency     = lazyre.New(`Entering emergency mode|Reached target (emergency\.target|Emergency Mode)`)
	// A panic ends the boot whatever the agent.
	rePanic = lazyre.New(`Kernel panic - not syncing: (.*)`)

	// Milestones between the kernel and the agent, which can be a minute
	// apart: the kernel starting init (the initramfs's /init, else the
	// root's), systemd and its welcome, and the targets the agent's units
	// wait for.
	reInit    = lazyre.New(`Run (\S+) as init process`)
	reSystemd = lazyre.New(`systemd\[1\]: systemd (\S+) running in system mode`)
	reWelcome = lazyre.New(`Welcome to (.+)!$`)
	reTarget  = lazyre.New(`Reached target ((?:local-fs|sysinit|basic|network|network-online)\.target)`)
)

// reEscape matches the terminal escape sequences a console line can hold:
// CSI (systemd colours its status lines: "[\x1b[0;32m  OK  \x1b[0m]"),
// the OSC, DCS, SOS, PM and APC strings (ESC ] P X ^ _ up to BEL or ESC \,
// or to the end of the line when unterminated: a window title, a
// clipboard write, a terminal query), and the two-byte escapes (ESC ( B).
// The guest writes the console: none of it may reach the user's terminal
// through a progress line, an error or the console tail.
var reEscape = lazyre.New("\x1b\\[[0-?]*[ -/]*[@-~]|\x1b[\\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\\\)?|\x1b[ -/]*[0-~]")

// printable returns a console line without carriage returns and escape
// sequences, and with every other control character (C0 but tab, DEL,
// C1) made visible as '?'.
func printable(s string) string {
	s = strings.ReplaceAll(s, "\r", "")
	if strings.Contains(s, "\x1b") {
		s = reEscape.ReplaceAllString(s, "")
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' || r >= 0x7f && r < 0xa0 {
			return '?'
		}
		return r
	}, s)
}

// line feeds one console line (without its newline).
func (w *watcher) line(l string) {
	if w.done {
		return
	}
	l = strings.TrimRight(printable(l), " ")
	if !w.kernel {
		if m := reKernel.FindStringSubmatch(l); m != nil {
			w.kernel = true
			w.say("kernel %s booting", m[1])
		}
	}
	if m := rePanic.FindStringSubmatch(l); m != nil {
		w.panic = m[1]
		w.fail("kernel panic: " + m[1])
		return
	}
	if !w.started {
		w.milestone(l)
	}
	if w.agent == agentIgnition {
		w.ignition(l)
	} else {
		w.cloudInit(l)
	}
}

// milestone says how far the boot got before the agent starts, each step
// once.
func (w *watcher) milestone(l string) {
	var step string
	if m := reInit.FindStringSubmatch(l); m != nil && m[1] == "/init" {
		step = "initramfs running (/init)"
	} else if m != nil {
		step = "init running (" + m[1] + ")"
	} else if m := reSystemd.FindStringSubmatch(l); m != nil {
		step = "systemd " + m[1] + " started"
	} else if m := reWelcome.FindStringSubmatch(l); m != nil {
		step = m[1] + " starting"
	} else if m := reTarget.FindStringSubmatch(l); m != nil {
		step = "reached " + m[1]
	}
	if step == "" || w.said[step] {
		return
	}
	if w.said == nil {
		w.said = map[string]bool{}
	}
	w.said[step] = true
	w.say("%s", step)
}

// result is the watcher's verdict once done.
func (w *watcher) result(agent string, elapsed time.Duration) *Result {
	return &Result{Agent: agent, OK: w.ok, Errors: w.errors, Warnings: w.warnings, Panic: w.panic, Elapsed: elapsed}
}

func (w *watcher) cloudInit(l string) {
	if m := reCIFinished.FindStringSubmatch(l); m != nil {
		w.summary = strings.TrimSpace(l[strings.Index(l, "Cloud-init v."):])
		if strings.HasPrefix(m[2], "DataSourceNone") {
			w.errors = append(w.errors, "cloud-init found no datasource (DataSourceNone): the guest did not see the seed or the metadata server")
		}
		w.finish(fmt.Sprintf("cloud-init %s finished (guest up %ss, %s)", m[1], m[3], m[2]))
		return
	}
	if m := reCIRunning.FindStringSubmatch(l); m != nil {
		if !w.started {
			w.started = true
			w.say("cloud-init %s started", m[1])
		}
		if m[2] != w.stage {
			w.stage = m[2]
			w.say("cloud-init stage %s", m[2])
		}
		return
	}
	if m := reCILog.FindStringSubmatch(l); m != nil {
		msg := fmt.Sprintf("%s[%s]: %s", m[1], m[2], m[3])
		if m[2] != "WARNING" || reCIError.MatchString(m[3]) {
			w.addError(msg)
		} else if len(w.warnings) < maxErrors {
			w.warnings = append(w.warnings, msg)
			w.say("cloud-init warning: %s", msg)
		}
		return
	}
	if m := reCIUnitFailed.FindStringSubmatch(l); m != nil {
		w.addError(m[1] + " failed")
		if m[1] == "cloud-final.service" {
			w.finish("cloud-final.service failed")
		}
		return
	}
	if w.started && reCIUnitDone.MatchString(l) {
		w.finish("cloud-init finished (cloud-final.service)")
	}
}

func (w *watcher) ignition(l string) {
	if m := reIgnFailed.FindStringSubmatch(l); m != nil {
		w.addError("Ignition failed: " + m[1])
		return
	}
	if m := reIgnUnitFailed.FindStringSubmatch(l); m != nil {
		unit := m[1] + m[2]
		w.fail(unit + " failed")
		return
	}
	if reEmergency.MatchString(l) {
		w.fail("the initramfs entered emergency mode")
		return
	}
	if reIgnComplete.MatchString(l) {
		w.finish("Ignition complete (ignition-complete.target)")
		return
	}
	if !strings.Contains(l, "gnition") {
		return
	}
	if m := reIgnVersion.FindStringSubmatch(l); m != nil && !w.started {
		w.started = true
		w.say("Ignition %s started", m[1])
	}
	if m := reIgnStage.FindStringSubmatch(l); m != nil && m[1] != w.stage {
		w.stage = m[1]
		w.say("Ignition stage %s", m[1])
	}
}

// maxErrors bounds the errors and warnings kept from one boot.
const maxErrors = 100

func (w *watcher) addError(e string) {
	if len(w.errors) < maxErrors {
		w.errors = append(w.errors, e)
	}
}

func (w *watcher) finish(what string) {
	w.done, w.ok = true, len(w.errors) == 0
	if w.summary == "" {
		w.summary = what
	}
	if w.ok {
		w.say("%s", what)
	} else {
		w.say("%s, with %d error(s)", what, len(w.errors))
	}
}

func (w *watcher) fail(why string) {
	w.addError(why)
	w.done, w.ok = true, false
	w.say("%s", why)
}
