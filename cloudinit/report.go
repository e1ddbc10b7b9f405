package cloudinit

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"errors"
	"path"
	"sync"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/internal/lib/scripttext"
	"github.com/vminit/vminit/internal/lib/systemd"
	"github.com/vminit/vminit/internal/lib/yaml11"
	"github.com/vminit/vminit/spec"
)

// Where the first-boot report's pieces go in the guest.
const (
	// ReportScript posts the GuestReport (report.py, Python's standard
	// library only).
	ReportScript = "/etc/vminit/first-boot-report.py"
	// ReportTrigger is a per-instance script of cloud-init's
	// scripts_per_instance module (final stage): it queues
	// bootreport.ReportUnit, which runs once cloud-final.service is over.
	ReportTrigger = "/var/lib/cloud/scripts/per-instance/vminit-first-boot-report"
)

//go:embed report.py
var reportSource []byte

// reportScript is ReportScript as the guest gets it: report.py without
// the comments below its opening block; made on first use, not at init,
// which every program linking the package would pay.
var reportScript = sync.OnceValue(func() []byte { return scripttext.Served(reportSource) })

// reportScriptGzip is ReportScript gzipped and base64-encoded, for its
// write_files entry (cloud-init's gz+b64 encoding): every served guest's
// user data carries it, in some 3.5 KB instead of 7.
var reportScriptGzip = sync.OnceValue(func() string {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression) // no name, no time: the same bytes every time
	zw.Write(reportScript())
	zw.Close()
	// In lines, as MIME has them: a line over 998 bytes would make a
	// multipart message carry the whole part base64 again (is7bit).
	return base64Lines(b.Bytes()) + "\n"
})

func reportScriptEntry() *yaml.Node {
	return yaml11.Mapping(
		"path", yaml11.String(ReportScript),
		"permissions", yaml11.String(spec.Mode(0o755).String()),
		"encoding", yaml11.String("gz+b64"),
		"content", yaml11.String(reportScriptGzip()),
	)
}

// reportMergeHow adds the report's keys to whatever the user data already
// has, the way cloud-init merges a later part: lists appended (the user's
// write_files stay, ours follow), mappings merged key by key with the
// user's value kept (a reporting handler of the user's own named vminit
// wins).
const reportMergeHow = "dict(no_replace,recurse_list)+list(append)+str()"

// The webhook's bounds: cloud-init posts from a thread while it works,
// but waits for the queue at the end of each stage (and drops the queue
// after three failures in a row), so an unreachable server costs a stage
// at most about three times timeout×(retries+1).
const (
	webhookTimeout = 5
	webhookRetries = 1
)

// WithReport returns user data, as UserData renders it, with what makes
// cloud-init report its first boot to the vminit server at base (a URL
// bootreport.ParseBaseURL accepts):
//
//   - the reporting webhook handler "vminit", posting each of cloud-init's
//     start and finish events to bootreport.EventsURL(base): cloud-init
//     22.4 applies a reporting key of the user data in the init-network
//     stage once it has consumed the user data (cmd/main.py,
//     apply_reporting_cfg), so the events of that stage's modules and of
//     the config and final stages are posted, the earlier ones (the
//     local stage, the datasource search) are not;
//   - ReportScript and bootreport.ReportUnit, which posts the GuestReport
//     (status.json, result.json, the tail of cloud-init-output.log, and
//     once the boot has settled the system's state and failed units) to
//     bootreport.ReportURL(base) once, after cloud-final.service;
//   - ReportTrigger, which starts the unit without waiting for it.
//
// The unit is started by a per-instance script rather than a runcmd entry
// because a user's runcmd replaces the generated one under cloud-init's
// default merge. A #cloud-config user data (or none) stays one document,
// with the report merged in by reportMergeHow; anything else (a script, a
// MIME message, a Jinja template, data cloud-init ignores) becomes a MIME
// multipart message of it and a #cloud-config part carrying the report
// and that merge_how.
func WithReport(userData []byte, base string) ([]byte, error) {
	base, err := bootreport.ParseBaseURL(base)
	if err != nil {
		return nil, err
	}
	ud, err := gunzip(userData)
	if err != nil {
		return nil, err
	}
	// The merges below take the overlay as nodes, as MergeCloudConfig
	// would parse it: marshalling it only to parse it again was most of
	// an instance's first fetch (BenchmarkFirstFetch).
	if len(bytes.TrimSpace(ud)) == 0 {
		return mergeReport(nil, base)
	}
	ctype := PartType(ud)
	if !isMIME(ud) && ctype == TypeCloudConfig {
		doc, err := normalize(ud)
		if err != nil {
			return nil, err
		}
		// A launch-index part applies to one instance of a launch only;
		// merged, the report would go with it.
		if doc == nil || lookup(doc, "launch-index") == nil {
			return mergeReport(doc, base)
		}
	}
	overlay, err := marshalCloudConfig(reportOverlay(base))
	if err != nil {
		return nil, err
	}
	if isMIME(ud) {
		if !utf8.Valid(ud) {
			return nil, errors.New("a MIME message must be UTF-8 text (cloud-init decodes it as such before parsing)")
		}
		return multipart(nestedPart(ud), simplePart(TypeCloudConfig, overlay)), nil
	}
	if ctype == "" {
		ctype = "text/plain" // cloud-init ignores it, in a part as alone
	}
	return multipart(simplePart(ctype, ud), simplePart(TypeCloudConfig, overlay)), nil
}

// mergeReport is MergeCloudConfig of the normalized document doc (nil:
// none) and the report overlay for base.
func mergeReport(doc *yaml.Node, base string) ([]byte, error) {
	if doc == nil {
		doc = yaml11.Mapping()
	}
	merged, err := mergeDocs(doc, reportOverlay(base))
	if err != nil {
		return nil, err
	}
	return marshalCloudConfig(merged)
}

// reportOverlay is the #cloud-config document WithReport adds.
func reportOverlay(base string) *yaml.Node {
	webhook := yaml11.Mapping(
		"type", yaml11.String("webhook"),
		"endpoint", yaml11.String(bootreport.EventsURL(base)),
		"timeout", yaml11.IntNode(webhookTimeout),
		"retries", yaml11.IntNode(webhookRetries),
	)
	files := yaml11.Sequence(
		reportScriptEntry(),
		fileEntry(path.Join(systemd.UnitDir, bootreport.ReportUnit), []byte(reportUnit(base)), 0o644, "", false, false),
		fileEntry(ReportTrigger, []byte(reportTrigger(base)), 0o755, "", false, false),
	)
	return yaml11.Mapping(
		"merge_how", yaml11.String(reportMergeHow),
		"reporting", yaml11.Mapping("vminit", webhook),
		"write_files", files,
	)
}

// reportUnit is bootreport.ReportUnit for cloud-init guests. Ordered after
// cloud-final.service, whose end is when cloud-init writes the final
// status.json and result.json. Type=simple, as Ignition's: the script
// waits for the boot to be over (`systemctl is-system-running --wait`),
// which a start job of its own, a oneshot's, would hold up until the
// wait's bound.
func reportUnit(base string) string {
	return `# Generated by vminit: posts cloud-init's first-boot result to the vminit
# server once, after the final stage (started by ` + path.Base(ReportTrigger) + `).
[Unit]
Description=vminit first-boot report
Wants=network-online.target
After=cloud-final.service network-online.target

[Service]
# Not oneshot: the script waits for the boot to be over, which a start job
# still running would hold up.
Type=simple
Environment=` + systemd.Environment(bootreport.ReportURLEnv, bootreport.ReportURL(base)) + `
ExecStart=/usr/bin/python3 ` + ReportScript + `
`
}

// reportTrigger is run by cloud-init's scripts_per_instance module, inside
// cloud-final.service: --no-block queues the unit, which is ordered after
// the very service running this script. daemon-reload makes systemd read
// the unit file write_files wrote. Without systemd (Alpine's OpenRC,
// where a systemctl line would fail cloud-init's module) it starts the
// script itself, detached, and the script waits for cloud-init's end
// (--after-cloud-init) as the unit's ordering does under systemd.
// VMINIT_REPORT_TEST_ROOT prefixes the paths it tests, for vminit's tests
// only, as in report.py.
func reportTrigger(base string) string {
	return `#!/bin/sh
# Generated by vminit: start the first-boot report (` + bootreport.ReportUnit + `).
root=${VMINIT_REPORT_TEST_ROOT:-}
if [ -d "$root/run/systemd/system" ]; then
	systemctl daemon-reload
	exec systemctl start --no-block ` + bootreport.ReportUnit + `
fi
` + bootreport.ReportURLEnv + `=` + spec.ShellQuote(bootreport.ReportURL(base)) + ` nohup /usr/bin/python3 "$root` + ReportScript + `" --after-cloud-init >>"$root/var/log/vminit-first-boot-report.log" 2>&1 &
`
}
