package cloudbaseinit

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/textproto"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/cloudinit"
)

// Executors are cloudbase-init's execcmd classes, which run a script:
// what each user-data format is sent to.
const (
	// ExecCmd is execcmd.Shell: the script as a .cmd file, run by cmd.exe.
	ExecCmd = "Shell"
	// ExecPowerShell is execcmd.PowershellSysnative: 64-bit PowerShell.
	ExecPowerShell = "PowershellSysnative"
	// ExecPowerShellX86 is execcmd.Powershell: PowerShell as the process's
	// own (32-bit on a 64-bit system when cloudbase-init is).
	ExecPowerShellX86 = "Powershell"
	// ExecBash is execcmd.Bash: bash, which a Windows image rarely has.
	ExecBash = "Bash"
	// ExecPython is execcmd.Python: python on the PATH.
	ExecPython = "Python"
	// ExecEC2 is execcmd.EC2Config: every <script> block run by cmd.exe,
	// then every <powershell> block by 64-bit PowerShell.
	ExecEC2 = "EC2Config"
)

// Kinds of user-data document cloudbase-init tells apart.
const (
	KindCloudConfig = "#cloud-config"
	KindMultipart   = "MIME multipart"
	KindScript      = "script"
	KindJinja       = "## template: jinja"
	KindCertificate = "X.509 certificate"
)

// Format is how cloudbase-init reads one user-data document.
type Format struct {
	// Kind is one of the Kind constants.
	Kind string
	// Header names a script's format as its user writes it ("#ps1",
	// "rem cmd", "<powershell>"…); empty for other kinds.
	Header string
	// Executor is the execcmd class a script is sent to.
	Executor string
}

// scripts is userdatautils._SCRIPTS in cloudbase-init's order, which is the
// order it tries them: the first whose pattern matches wins. The patterns
// are Python's re.search on bytes, "^" the start of the data.
var scripts = []struct {
	header, executor string
	re               *regexp.Regexp
}{
	{"rem cmd", ExecCmd, regexp.MustCompile(`^rem[ \t\n\r\f\v]+cmd[ \t\n\r\f\v]`)},
	{"#!/usr/bin/env python", ExecPython, regexp.MustCompile(`^#![ \t\n\r\f\v]*/usr/bin/env[ \t\n\r\f\v]+python[ \t\n\r\f\v]`)},
	{"#!", ExecBash, regexp.MustCompile(`^#!`)},
	{"#ps1", ExecPowerShell, regexp.MustCompile(`^#(ps1|ps1_sysnative)[ \t\n\r\f\v]`)},
	{"#ps1_x86", ExecPowerShellX86, regexp.MustCompile(`^#ps1_x86[ \t\n\r\f\v]`)},
	{"<powershell> or <script>", ExecEC2, regexp.MustCompile(`</?(script|powershell)>`)},
}

// ErrUnsupported is the error of user data cloudbase-init would not run.
var ErrUnsupported = errors.New("cloudbase-init does not recognise this user data and would not run it: start it with #cloud-config, #ps1, #ps1_sysnative, #ps1_x86, rem cmd or #!, wrap it in EC2's <powershell> or <script> tags, or give a MIME multipart message")

// Classify says how cloudbase-init 1.1.9 reads data as a whole user-data
// document (UserDataPlugin._process_user_data): a MIME multipart message
// when its first header block names one, else a Jinja template, a
// #cloud-config document, a PEM certificate, or a script by its first
// bytes. Gzip is decompressed first, as cloudbase-init does. Data it
// would not run is ErrUnsupported.
func Classify(data []byte) (Format, error) {
	data, err := cloudinit.Decompress(data)
	if err != nil {
		return Format{}, err
	}
	head, _, _ := bytes.Cut(data, []byte("\n\n"))
	switch {
	case bytes.Contains(head, []byte("Content-Type: multipart")):
		return Format{Kind: KindMultipart}, nil
	case isJinja(data):
		return Format{Kind: KindJinja}, nil
	case bytes.HasPrefix(data, []byte("#cloud-config")):
		return Format{Kind: KindCloudConfig}, nil
	case bytes.HasPrefix(bytes.TrimSpace(data), []byte("-----BEGIN CERTIFICATE-----")):
		return Format{Kind: KindCertificate}, nil
	}
	if f, ok := classifyScript(data); ok {
		return f, nil
	}
	return Format{}, ErrUnsupported
}

// classifyScript is userdatautils.get_command: the first script pattern
// data matches.
func classifyScript(data []byte) (Format, bool) {
	for _, s := range scripts {
		if s.re.Match(data) {
			return Format{Kind: KindScript, Header: s.header, Executor: s.executor}, true
		}
	}
	return Format{}, false
}

// isJinja is cloudbase-init's Jinja2 template engine's load: a first line
// "## template: jinja", case-insensitively, spaces allowed around the
// words.
func isJinja(data []byte) bool {
	line, _, _ := bytes.Cut(data, []byte("\n"))
	return jinjaRE.Match(bytes.TrimRight(line, "\r"))
}

var jinjaRE = regexp.MustCompile(`(?i)^##\s*template:\s*jinja\s*$`)

// Modules are the cloud-config keys cloudbase-init 1.1.9 implements
// (cloudconfigplugins.factory.PLUGINS), in the order it runs them.
var Modules = []string{"write_files", "set_timezone", "timezone", "set_hostname", "hostname", "ntp", "groups", "users", "runcmd"}

// CheckUserData checks user data as cloudbase-init reads it: every
// problem, each naming where in the document it is. A #cloud-config key
// cloudbase-init has no module for is an error (it would log and skip it),
// and so is a MIME part no plugin of its takes.
func CheckUserData(data []byte) []string {
	f, err := Classify(data)
	if err != nil {
		return []string{err.Error()}
	}
	data, _ = cloudinit.Decompress(data)
	switch f.Kind {
	case KindCloudConfig:
		return checkCloudConfig(data)
	case KindMultipart:
		return checkMultipart(data, 0)
	}
	return nil
}

// checkCloudConfig refuses a document cloudbase-init cannot load and the
// keys it has no module for.
func checkCloudConfig(data []byte) []string {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return []string{"#cloud-config: " + err.Error()}
	}
	if len(doc.Content) == 0 {
		return []string{"#cloud-config: empty; cloudbase-init refuses an empty document"}
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return []string{fmt.Sprintf("#cloud-config line %d: want a mapping of module names", m.Line)}
	}
	var probs []string
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if !slices.Contains(Modules, k.Value) {
			probs = append(probs, fmt.Sprintf("#cloud-config line %d: %s: cloudbase-init has no module for it and would skip it (it implements %s)", k.Line, k.Value, strings.Join(Modules, ", ")))
		}
		if v := m.Content[i+1]; (k.Value == "timezone" || k.Value == "set_timezone") && v.Kind == yaml.ScalarNode {
			if p := TimezoneProblem(v.Value); p != "" {
				probs = append(probs, fmt.Sprintf("#cloud-config line %d: %s: %s", v.Line, k.Value, p))
			}
		}
	}
	return probs
}

// partPlugins are the content types of cloudbase-init's default
// user_data_plugins.
var partPlugins = []string{"text/part-handler", cloudinit.TypeCloudConfig, cloudinit.TypeCloudBoothook, cloudinit.TypeShellScript, "multipart/mixed", "text/x-cfninitdata"}

// maxDepth bounds nested multipart messages.
const maxDepth = 8

// checkMultipart walks a MIME message as email.message.walk does and
// checks each part: a type cloudbase-init has a plugin for, a shell
// script with a file name and a header or extension it runs, a
// cloud-config of its modules.
func checkMultipart(data []byte, depth int) []string {
	if depth > maxDepth {
		return []string{fmt.Sprintf("MIME multipart nested deeper than %d", maxDepth)}
	}
	r := textproto.NewReader(bufioReader(data))
	h, err := r.ReadMIMEHeader()
	if err != nil && len(h) == 0 {
		return []string{"MIME multipart: " + err.Error()}
	}
	mt, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mt, "multipart/") || params["boundary"] == "" {
		return []string{"MIME multipart: the message's Content-Type names no multipart boundary"}
	}
	mr := multipart.NewReader(r.R, params["boundary"])
	var probs []string
	for i := 1; ; i++ {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return append(probs, fmt.Sprintf("MIME multipart part %d: %v", i, err))
		}
		body, err := io.ReadAll(io.LimitReader(p, cloudinit.MaxUserDataSize))
		if err != nil {
			return append(probs, fmt.Sprintf("MIME multipart part %d: %v", i, err))
		}
		for _, pr := range checkPart(p.Header, body, depth) {
			probs = append(probs, fmt.Sprintf("MIME multipart part %d: %s", i, pr))
		}
	}
	return probs
}

func checkPart(h textproto.MIMEHeader, body []byte, depth int) []string {
	ct := h.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		mt = "text/plain" // email's default
	}
	if strings.HasPrefix(mt, "multipart/") {
		var raw bytes.Buffer
		for _, k := range []string{"Content-Type", "Mime-Version"} {
			if v := h.Get(k); v != "" {
				fmt.Fprintf(&raw, "%s: %s\n", k, v)
			}
		}
		raw.WriteString("\n")
		raw.Write(body)
		return checkMultipart(raw.Bytes(), depth+1)
	}
	if !slices.Contains(partPlugins, mt) {
		return []string{fmt.Sprintf("Content-Type %s: cloudbase-init has no plugin for it and would skip it (it takes %s)", mt, strings.Join(partPlugins, ", "))}
	}
	body, err = decodeBody(h.Get("Content-Transfer-Encoding"), body)
	if err != nil {
		return []string{err.Error()}
	}
	switch mt {
	case cloudinit.TypeCloudConfig:
		return checkCloudConfig(body)
	case cloudinit.TypeShellScript:
		_, params, _ := mime.ParseMediaType(h.Get("Content-Disposition"))
		name := params["filename"]
		if name == "" {
			return []string{"text/x-shellscript without a file name (Content-Disposition filename): cloudbase-init writes the part to a file of that name and fails without one"}
		}
		if _, ok := fileExecutor(name, body); !ok {
			return []string{fmt.Sprintf("text/x-shellscript %q: neither its extension (.cmd, .ps1, .sh, .py, .exe) nor its first line tells cloudbase-init how to run it", name)}
		}
	case cloudinit.TypeCloudBoothook:
		return []string{"text/cloud-boothook: cloudbase-init does not run boothooks (it logs and skips them)"}
	}
	return nil
}

// fileExecutor is userdatautils.get_command_from_path: the executor by
// the file's extension, else by its content.
func fileExecutor(name string, data []byte) (string, bool) {
	ext := ""
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		ext = strings.ToLower(name[i+1:])
	}
	switch ext {
	case "cmd", "exe":
		return ExecCmd, true
	case "py":
		return ExecPython, true
	case "sh":
		return ExecBash, true
	case "ps1":
		return ExecPowerShell, true
	}
	f, ok := classifyScript(data)
	return f.Executor, ok
}

func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }

// decodeBody is a part's payload as email's get_payload(decode=True)
// gives it.
func decodeBody(cte string, body []byte) ([]byte, error) {
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "base64":
		out, err := io.ReadAll(base64.NewDecoder(base64.StdEncoding, bytes.NewReader(bytes.Map(dropSpace, body))))
		if err != nil {
			return nil, fmt.Errorf("Content-Transfer-Encoding base64: %v", err)
		}
		return out, nil
	case "quoted-printable":
		return io.ReadAll(quotedprintable.NewReader(bytes.NewReader(body)))
	}
	return body, nil
}

func dropSpace(r rune) rune {
	if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
		return -1
	}
	return r
}
