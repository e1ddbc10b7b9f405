package capi

import (
	"testing"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
)

// parseOracle compiles each text as cloud-init 22.4 compiles user data
// (templater's jinja2 Template, with its options), and says which
// compile.
const parseOracle = `
import json, sys
from cloudinit import templater
out = []
for text in json.load(sys.stdin):
    try:
        templater.JTemplate(text, undefined=templater.UndefinedJinjaVariable, trim_blocks=True, extensions=["jinja2.ext.do"])
        out.append(True)
    except Exception as e:
        out.append(False)
json.dump(out, sys.stdout)
`

// TestJinjaProblemAgreesWithCloudInit: vminit's check that a text parses
// as Jinja says what cloud-init's own Jinja says, on what published
// templates write and on what breaks them.
func TestJinjaProblemAgreesWithCloudInit(t *testing.T) {
	texts := []string{
		"{{ ds.meta_data.local_hostname }}",
		"openstack:///'{{ instance_id }}'",
		"{{ local_hostname }}",
		"{{- v1.local_hostname -}}",
		"{% if v1.region %}{{ v1.region }}{% else %}none{% endif %}",
		"{% for k in ds.meta_data %}{{ k }}\n{% endfor %}",
		"{# a comment #}{{ x | default('y') }}",
		"{% set a = 1 %}{{ a }}",
		"{% raw %}{{ .Values }}{% endraw %}",
		"{{ d['a-b'] }} {{ f(1, [2], {'k': 3}) }}",
		"echo '}}' {{ 'a}}b' }}",
		"{{ .Values.x }}",
		"{{ }}",
		"{{ x ",
		"{% if x %}a",
		"{% endif %}",
		"{% else %}",
		"{% frobnicate %}",
		"{{ f(1 }}",
		"{{ a] }}",
		"{# open",
		"{% raw %}x",
		"{% if a %}{% for b in c %}{% endif %}{% endfor %}",
		"{% do x.append(1) %}",
		"plain text, } and { alone",
	}
	var want []bool
	cloudinittest.Run(t, parseOracle, texts, &want)
	for i, text := range texts {
		_, _, msg := jinjaProblem(text)
		if (msg == "") != want[i] {
			t.Errorf("%q: vminit says %q, cloud-init's Jinja parses it: %v", text, msg, want[i])
		}
	}
}
