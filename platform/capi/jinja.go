package capi

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/internal/lib/lazyre"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/spec"
)

// JinjaHeader is the first line of CABPK's cloud-config: cloud-init
// renders the user data as a Jinja template with the instance's data
// (instance-data.json: ds.meta_data, v1 and its top-level aliases such as
// local_hostname) before reading it as #cloud-config.
const JinjaHeader = "## template: jinja\n"

// instanceData matches a Jinja tag that reads cloud-init's instance data:
// ds (the datasource's meta-data), v1 and v2 (the standardized keys),
// merged_cfg, sys_info, and the v1 keys cloud-init also puts at the top
// level (local_hostname, instance_id…). Published templates write
// {{ ds.meta_data.local_hostname }} and {{ local_hostname }} for the
// machine's name in kubelet's node name.
//
// The name must start the tag or follow a blank or an operator: Helm's
// {{ .Values.region }} reads no instance data.
var instanceData = lazyre.New(`\{[{%][-+]?\s*(?:[^}%]*[\s(\[,=<>+*/~!-])?(ds|v1|v2|merged_cfg|sys_info|local_hostname|instance_id|cloud_name|cloud_id|cloud_platform|availability_zone|region|platform|subplatform|distro|distro_release|distro_version|kernel_release|machine|python_version|public_ssh_keys|system_platform|variant)\b`)

// jinja finds the object's Jinja: when a string of its KubeadmConfig spec
// reads cloud-init's instance data, the user data must keep CABPK's
// header for cloud-init to render it (else the kubelet would get the
// literal "{{ ds.meta_data.local_hostname }}" as its node name), and every
// string then goes through cloud-init's Jinja: each must parse. Without
// such a string there is no header, and "{{" stays literal (CABPK's would
// evaluate it). Ignition has no Jinja (CABPK's Ignition neither).
func (c *conv) jinja() {
	if c.ignition {
		return
	}
	var texts [][2]string // path, text
	raw, err := json.Marshal(c.cs)
	if err != nil {
		c.b.Errorf(c.path, "%v", err)
		return
	}
	var v any
	json.Unmarshal(raw, &v)
	walkStrings(v, c.path, func(path, s string) {
		if strings.Contains(s, "{{") || strings.Contains(s, "{%") || strings.Contains(s, "{#") {
			texts = append(texts, [2]string{path, s})
		}
	})
	if !slices.ContainsFunc(texts, func(t [2]string) bool { return instanceData.MatchString(t[1]) }) {
		return
	}
	c.templated = true
	c.metaDataKeys(texts)
	c.encodedFiles()
	for _, t := range texts {
		if line, col, msg := jinjaProblem(t[1]); msg != "" {
			c.b.TextErrorf(t[0], line, col, "%s: %s reads cloud-init's instance data with Jinja, so its user data is one Jinja template (CABPK's \"## template: jinja\"), and cloud-init, unable to parse this text, would ignore all of it (CABPK delivers it so)", msg, c.what())
		}
	}
}

// dsMetaData matches a read of the datasource's meta-data in Jinja.
var dsMetaData = lazyre.New(`\bds\.meta_data\.([A-Za-z0-9_]+)`)

// The keys of ds.meta_data (hyphens read as underscores) on each seed
// vminit writes: NoCloud's meta-data file, ConfigDrive's meta_data.json.
var (
	noCloudKeys     = []string{"instance_id", "local_hostname", "public_keys"}
	configDriveKeys = []string{"uuid", "name", "hostname", "launch_index", "public_keys"}
)

// metaDataKeys chooses the seed whose meta-data has the keys the texts
// read: Cluster API's vSphere provider writes {{ ds.meta_data.hostname }},
// which cloud-init's VMware datasource has and NoCloud's meta-data has
// not, but ConfigDrive's meta_data.json has; a key neither has is a
// warning, since cloud-init renders it as CI_MISSING_JINJA_VAR/NAME.
func (c *conv) metaDataKeys(texts [][2]string) {
	var path string
	var keys []string
	for _, t := range texts {
		for _, m := range dsMetaData.FindAllStringSubmatch(t[1], -1) {
			if !slices.Contains(keys, m[1]) {
				keys, path = append(keys, m[1]), t[0]
			}
		}
	}
	in := func(set []string) bool {
		return !slices.ContainsFunc(keys, func(k string) bool { return !slices.Contains(set, k) })
	}
	switch {
	case in(noCloudKeys):
	case in(configDriveKeys):
		c.b.Instance.Spec.Datasource = spec.DatasourceConfigDrive
		c.b.Warnf(path, "reads ds.meta_data.%s: written as a config-2 drive, whose meta_data.json has them (NoCloud's meta-data has not)", strings.Join(keys, ", ds.meta_data."))
	default:
		c.b.Warnf(path, "reads ds.meta_data.%s, which neither NoCloud's meta-data nor ConfigDrive's has: cloud-init renders what is missing as CI_MISSING_JINJA_VAR/NAME", strings.Join(keys, ", ds.meta_data."))
	}
}

// hasJinjaMarker reports whether text holds what Jinja reads as a tag.
func hasJinjaMarker(text string) bool { return nextTag(text, 0) >= 0 }

// encodedFiles refuses a file given encoded (base64, gzip) whose text has
// Jinja markers: CABPK writes it encoded, out of Jinja's sight, and vminit
// writes text as text, which the one Jinja template would evaluate.
func (c *conv) encodedFiles() {
	for i, f := range c.cs.Files {
		if f.Encoding == "" {
			continue
		}
		for _, sf := range c.b.Instance.Spec.Files {
			if sf.Path == f.Path && sf.Content != nil && hasJinjaMarker(*sf.Content) {
				c.b.Errorf(fmt.Sprintf("%s.files[%d].content", c.path, i), "decoded, its text holds {{, {%% or {#, which cloud-init's Jinja would evaluate in this object's user data (one Jinja template: %s reads cloud-init's instance data); CABPK writes the file %s, out of Jinja's sight, and vminit writes text as text, so it cannot deliver this file as CABPK does", c.what(), f.Encoding)
			}
		}
	}
}

// walkStrings calls f with each string in v (decoded JSON) and its path,
// as the object's fields are spelt: files[0].content.
func walkStrings(v any, path string, f func(path, s string)) {
	switch v := v.(type) {
	case string:
		f(path, v)
	case []any:
		for i, e := range v {
			walkStrings(e, fmt.Sprintf("%s[%d]", path, i), f)
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			walkStrings(v[k], path+"."+k, f)
		}
	}
}

// withJinjaHeader makes res's user data CABPK's: the generated
// #cloud-config whole, behind the Jinja header, as
// spec.cloudInit.userData with userDataOnly (nothing generated beside
// it), so that `convert --to spec` still builds the same bytes.
func (c *conv) withJinjaHeader(res *platform.Result, object string) (*platform.Result, error) {
	ud, err := cloudinit.UserData(res.Instance)
	if err != nil {
		return nil, err
	}
	// Each text parsed (jinja); this is the whole template, with what
	// came from Secrets, as cloud-init parses it.
	if line, col, msg := jinjaProblem(string(ud)); msg != "" {
		return nil, spec.Errors{c.b.Doc.Error(c.path, fmt.Sprintf("the user data, one Jinja template since %s reads cloud-init's instance data, does not parse at its line %d, column %d: %s; cloud-init would ignore all of it", c.what(), line, col, msg))}
	}
	s := &c.b.Instance.Spec
	s.CloudInit.UserData = JinjaHeader + string(ud)
	s.CloudInit.UserDataOnly = true
	// What only the generated document carries is in ud now: the spec may
	// not hold it beside userDataOnly.
	s.Files, s.Users, s.Commands, s.BootCommands, s.Mounts, s.Units = nil, nil, nil, nil, nil, nil
	s.CloudInit.NoDefaultUser = false
	c.b.From("spec.cloudInit.userData", c.path)
	out, err := c.b.Finish(object)
	if err != nil {
		return nil, err
	}
	out.Warnings = res.Warnings
	return out, nil
}

// jinjaProblem returns where and why Jinja (jinja2 with its default
// delimiters, as cloud-init 22.4 renders user data) cannot parse text, or
// an empty message: tags closed, block statements nested and closed,
// expressions that start as an expression can.
func jinjaProblem(text string) (line, col int, msg string) {
	var open []string // the block statements open, innermost last
	var openAt []int
	for i := 0; i < len(text); {
		j := nextTag(text, i)
		if j < 0 {
			break
		}
		kind := text[j : j+2]
		closer := map[string]string{"{{": "}}", "{%": "%}", "{#": "#}"}[kind]
		end := closeOf(text, j+2, closer, kind != "{#")
		if end < 0 {
			line, col = position(text, j)
			return line, col, fmt.Sprintf("%s is never closed by %s", kind, closer)
		}
		inner := strings.TrimSpace(strings.Trim(text[j+2:end], "-+"))
		i = end + 2
		switch kind {
		case "{{":
			if m := exprProblem(inner); m != "" {
				line, col = position(text, j)
				return line, col, m
			}
		case "{%":
			word, rest, _ := strings.Cut(inner, " ")
			switch {
			case word == "raw":
				k := endRaw.FindStringIndex(text[i:])
				if k == nil {
					line, col = position(text, j)
					return line, col, "{% raw %} is never closed by {% endraw %}"
				}
				i += k[1]
			case slices.Contains(blockTags, word) || word == "set" && !strings.Contains(rest, "="):
				open, openAt = append(open, word), append(openAt, j)
			case word == "elif" || word == "else":
				if len(open) == 0 || open[len(open)-1] != "if" && !(word == "else" && open[len(open)-1] == "for") {
					line, col = position(text, j)
					return line, col, fmt.Sprintf("{%% %s %%} outside {%% if %%}", word)
				}
			case strings.HasPrefix(word, "end"):
				if len(open) == 0 || open[len(open)-1] != word[3:] {
					line, col = position(text, j)
					return line, col, fmt.Sprintf("{%% %s %%} closes no {%% %s %%}", word, word[3:])
				}
				open, openAt = open[:len(open)-1], openAt[:len(openAt)-1]
			case !slices.Contains(simpleTags, word):
				line, col = position(text, j)
				return line, col, fmt.Sprintf("{%% %s %%}: not a Jinja statement", word)
			}
		}
	}
	if n := len(open); n > 0 {
		line, col = position(text, openAt[n-1])
		return line, col, fmt.Sprintf("{%% %s %%} is never closed by {%% end%s %%}", open[n-1], open[n-1])
	}
	return 0, 0, ""
}

// The statements of Jinja that open a block, and those that do not.
var (
	blockTags  = []string{"if", "for", "macro", "call", "filter", "block", "with", "autoescape"}
	simpleTags = []string{"set", "include", "import", "from", "extends", "do", "break", "continue"}
	endRaw     = lazyre.New(`\{%[-+]?\s*endraw\s*[-+]?%\}`)
)

// nextTag is the index of the next "{{", "{%" or "{#" at or after i, or -1.
func nextTag(text string, i int) int {
	for k := i; k+1 < len(text); k++ {
		if text[k] == '{' && (text[k+1] == '{' || text[k+1] == '%' || text[k+1] == '#') {
			return k
		}
	}
	return -1
}

// closeOf is the index of closer at or after i, outside string literals
// when quoted, or -1.
func closeOf(text string, i int, closer string, quoted bool) int {
	var quote byte
	for k := i; k+1 < len(text); k++ {
		switch ch := text[k]; {
		case quote != 0:
			if ch == '\\' {
				k++
			} else if ch == quote {
				quote = 0
			}
		case quoted && (ch == '"' || ch == '\''):
			quote = ch
		case text[k:k+2] == closer:
			return k
		}
	}
	return -1
}

// exprProblem says why inner, the text of {{ }}, is no Jinja expression
// (empty, starting with what no expression starts with, or brackets
// unbalanced), or "".
func exprProblem(inner string) string {
	if inner == "" {
		return "{{ }} holds no expression"
	}
	if c := inner[0]; !(c == '_' || c == '"' || c == '\'' || c == '(' || c == '[' || c == '{' || c == '-' || c == '+' ||
		c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
		return fmt.Sprintf("{{ %s }}: %q cannot start a Jinja expression", inner, string(c))
	}
	var stack []byte
	pairs := map[byte]byte{')': '(', ']': '[', '}': '{'}
	var quote byte
	for k := 0; k < len(inner); k++ {
		ch := inner[k]
		switch {
		case quote != 0:
			if ch == '\\' {
				k++
			} else if ch == quote {
				quote = 0
			}
		case ch == '"' || ch == '\'':
			quote = ch
		case ch == '(' || ch == '[' || ch == '{':
			stack = append(stack, ch)
		case pairs[ch] != 0:
			if len(stack) == 0 || stack[len(stack)-1] != pairs[ch] {
				return fmt.Sprintf("{{ %s }}: unbalanced %q", inner, string(ch))
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 || quote != 0 {
		return fmt.Sprintf("{{ %s }}: a bracket or quote is never closed", inner)
	}
	return ""
}

// position is the 1-based line and column of byte i of text.
func position(text string, i int) (line, col int) {
	line = 1 + strings.Count(text[:i], "\n")
	return line, i - strings.LastIndex(text[:i], "\n")
}
