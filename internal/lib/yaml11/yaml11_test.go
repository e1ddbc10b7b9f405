package yaml11_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/lib/yaml11"
	"github.com/vminit/vminit/internal/testing/cloudinittest"
)

// samples are strings near the edges of YAML 1.1's implicit types.
var samples = []string{
	"", "~", "null", "Null", "NULL", "nULL", "none", "None",
	"yes", "Yes", "YES", "yEs", "no", "No", "NO", "y", "Y", "n", "N", "on", "On", "ON", "off", "Off", "OFF",
	"true", "True", "TRUE", "tRUE", "false", "False", "FALSE",
	"0", "00", "0644", "0755", "08", "09", "0o644", "0x1F", "0xg", "0b101", "0b12", "-0b1", "+12", "-0",
	"1_000", "1__0", "_1", "1_", "0_7", "0_8", "1:20", "1:60", "190:20:30", "52:54:00:12:34:56", "aa:bb:cc:dd:ee:ff",
	"52:54:00:9a:00:01", "00:11:22:33:44:55", "1:2", "-1:20", "1:20.5", "1.", ".5", "._5", "1.5e3", "1.5e+3", "1e5", "1.0e-5",
	"1_0.5", ".inf", "-.Inf", "+.INF", ".NaN", ".nan", "nan", "inf", "1.2.3", "192.0.2.1", "192.0.2.0/24", "2001:db8::1", "::", "::1",
	"2001-12-14", "2001-1-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10 -5", "2001-12-14 21:59:43", "2001-12-14T21:59",
	"20011214", "<<", "<", "=", "==", "!", "&", "*", "-", "--", "---", "...", "?", ":", "a: b", "a #b", "#c", "- x", "@x", "`x",
	"802.3ad", "active-backup", "ALL=(ALL) NOPASSWD:ALL", "Europe/Berlin", "/etc/motd", "0600", "root:root", "deploy:deploy",
	"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIOcQfB+HkOOjJNE+kDUn8dHs94p8jX2ceyNdSdYS5bh alice@example.com",
	"$6$salt$hash.value/x", "%x", "'q'", "\"q\"", "{a}", "[a]", " lead", "trail ", "tab\there", "multi\nline", "multi\nline\n",
	"trailing\n\n", "\ttab", "é", "Jürgen", "\u2028", "\x00nul", "\x1besc", "\u0085nel", "\ufeffbom", "cr\r\nlf",
}

func TestResolveMatchesPyYAML(t *testing.T) {
	in := append([]string(nil), samples...)
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := "0123456789_:.-+eExob aA~ntTfFyYl"
	for range 3000 {
		n := 1 + r.IntN(8)
		var b strings.Builder
		for range n {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		s := strings.TrimSpace(b.String())
		in = append(in, s)
	}
	var plain []string
	for _, s := range in {
		if !strings.ContainsAny(s, "\n\r") {
			plain = append(plain, s)
		}
	}
	var tags []string
	cloudinittest.Run(t, `
import json, sys, yaml
r = yaml.SafeLoader("")
out = []
for s in json.load(sys.stdin):
    t = r.resolve(yaml.ScalarNode, s, (True, False))
    out.append(t.replace("tag:yaml.org,2002:", "!!"))
json.dump(out, sys.stdout)
`, plain, &tags)
	for i, s := range plain {
		if got := yaml11.Resolve(s); got != tags[i] {
			t.Errorf("Resolve(%q) = %s, PyYAML says %s", s, got, tags[i])
		}
	}
}

func TestStringRoundTrip(t *testing.T) {
	seq := yaml11.Strings(samples)
	doc := yaml11.Mapping("values", seq)
	for _, s := range samples {
		// Strings as mapping keys take the same path.
		yaml11.AddPair(doc, "k"+s, yaml11.String(s))
		yaml11.AddPair(doc, s+"k", yaml11.String(s))
	}
	data, err := yaml11.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	cloudinittest.Run(t, `
import json, sys
from cloudinit import safeyaml
json.dump(safeyaml.load(json.load(sys.stdin)), sys.stdout)
`, string(data), &got)
	vals, _ := got["values"].([]any)
	if len(vals) != len(samples) {
		t.Fatalf("PyYAML read %d values, want %d:\n%s", len(vals), len(samples), data)
	}
	for i, s := range samples {
		if vals[i] != s {
			t.Errorf("%q came back as %#v; encoded:\n%s", s, vals[i], data)
		}
		if got["k"+s] != s || got[s+"k"] != s {
			t.Errorf("key %q: %#v %#v", s, got["k"+s], got[s+"k"])
		}
	}
}

func ExampleString() {
	doc := yaml11.Mapping(
		"mac", yaml11.String("52:54:00:12:34:56"),
		"permissions", yaml11.String("0644"),
		"answer", yaml11.String("yes"),
		"path", yaml11.String("/etc/motd"),
	)
	out, _ := yaml11.Marshal(doc)
	fmt.Print(string(out))
	// Output:
	// mac: "52:54:00:12:34:56"
	// permissions: "0644"
	// answer: "yes"
	// path: /etc/motd
}
