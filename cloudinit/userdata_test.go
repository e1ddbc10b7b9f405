package cloudinit

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
)

// pyParts lists the parts cloud-init's UserDataProcessor makes of each
// user-data blob: what the part handlers will be given.
const pyParts = `
import json, sys, base64
from cloudinit import user_data as ud, util

class Paths:
    def get_ipath_cur(self, name=None):
        return "/nonexistent/vminit-test"

p = ud.UserDataProcessor.__new__(ud.UserDataProcessor)
p.paths, p.ssl_details = Paths(), None

def parts(blob):
    out = []
    for part in p.process(blob).walk():
        if ud.is_skippable(part):
            continue
        payload = util.fully_decoded_payload(part)
        if isinstance(payload, str):
            payload = payload.encode("utf-8", "surrogateescape")
        out.append({"type": part.get_content_type(),
                    "payload": base64.b64encode(payload).decode(),
                    "filename": part.get_filename(),
                    "merge_type": part.get("Merge-Type"),
                    "launch_index": part.get("Launch-Index")})
    return out

json.dump([{"ours": parts(base64.b64decode(o)), "user": parts(base64.b64decode(u))}
           for o, u in json.load(sys.stdin)], sys.stdout)
`

type pyPart struct {
	Type        string  `json:"type"`
	Payload     []byte  `json:"payload"`
	Filename    *string `json:"filename"`
	MergeType   *string `json:"merge_type"`
	LaunchIndex *string `json:"launch_index"`
}

func gz(s string) string {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.String()
}

// TestCombineMIMEParts checks, with cloud-init's UserDataProcessor, that the
// message Combine builds gives cloud-init the generated #cloud-config first
// and then exactly the parts the user's data gives on its own.
func TestCombineMIMEParts(t *testing.T) {
	included := filepath.Join(t.TempDir(), "included.sh")
	if err := os.WriteFile(included, []byte("#!/bin/sh\necho included\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"script":                  "#!/bin/sh\necho hi\n",
		"script without newline":  "#!/bin/bash\necho hi",
		"script with blank lines": "#!/bin/sh\n\necho hi\n\n\n",
		"non-ASCII script":        "#!/bin/sh\necho 'J\u00fcrgen \u2603'\n",
		"CRLF script":             "#!/bin/sh\r\necho hi\r\n",
		"script naming MIME":      "#!/bin/sh\n# MIME-Version: 1.0 is not a header here\necho hi\n",
		"leading white space":     "\n  \t#!/bin/sh\necho hi\n",
		"upper case":              "#CLOUD-BOOTHOOK\n#!/bin/sh\necho boot\n",
		"boothook":                "#cloud-boothook\n#!/bin/sh\necho boot > /dev/console\n",
		"jinja":                   "## template: jinja\n#cloud-config\nruncmd:\n  - echo {{ v1.local_hostname }}\n",
		"include":                 "#include\nfile://" + included + "\n",
		"part-handler":            "#part-handler\ndef list_types():\n    return []\ndef handle_part(data, ctype, filename, payload):\n    pass\n",
		"archive":                 "#cloud-config-archive\n- type: text/x-shellscript\n  content: \"#!/bin/sh\\necho a\\n\"\n  filename: a.sh\n- content: \"#cloud-config\\nruncmd: [b]\\n\"\n",
		"jsonp":                   "#cloud-config-jsonp\n[{\"op\": \"add\", \"path\": \"/runcmd/-\", \"value\": \"echo patched\"}]\n",
		"gzip script":             gz("#!/bin/sh\necho compressed\n"),
		"launch-index":            "#cloud-config\nlaunch-index: 0\nruncmd: [echo zero]\n",
		"MIME multipart": "Content-Type: multipart/mixed; boundary=\"XYZ\"\r\nMIME-Version: 1.0\r\n\r\npreamble\r\n--XYZ\r\n" +
			"Content-Type: text/cloud-config; charset=\"us-ascii\"\r\nMerge-Type: list(append)+dict(recurse_array)+str()\r\n" +
			"Content-Disposition: attachment; filename=\"extra.yaml\"\r\n\r\n#cloud-config\r\nruncmd: [echo mime]\r\n" +
			"--XYZ\r\nContent-Type: text/x-shellscript\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
			base64.StdEncoding.EncodeToString([]byte("#!/bin/sh\necho b64\n")) + "\r\n--XYZ--\r\nepilogue\r\n",
		"MIME single part": "MIME-Version: 1.0\nContent-Type: text/x-shellscript; charset=\"utf-8\"\n\n#!/bin/sh\necho single\n",
		"MIME nested":      "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=a\n\n--a\nContent-Type: multipart/alternative; boundary=b\n\n--b\nContent-Type: text/x-shellscript\n\n#!/bin/sh\necho deep\n--b--\n--a--\n",
	}
	gen, err := CloudConfig(loadSpec(t, fullSpec, nil))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var in [][2][]byte
	for name, user := range cases {
		out, err := Combine(gen, []byte(user))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		again, _ := Combine(gen, []byte(user))
		if !bytes.Equal(out, again) {
			t.Errorf("%s: two runs differ", name)
		}
		if !strings.HasPrefix(string(out), "Content-Type: multipart/mixed; boundary=\"vminit-") {
			t.Errorf("%s: not a multipart message:\n%s", name, out)
		}
		names = append(names, name)
		in = append(in, [2][]byte{out, []byte(user)})
	}
	var res []struct{ Ours, User []pyPart }
	cloudinittest.Run(t, pyParts, in, &res)
	for i, name := range names {
		ours, user := res[i].Ours, res[i].User
		if len(ours) != len(user)+1 {
			t.Errorf("%s: cloud-init sees %d parts in ours, %d in the user's alone:\n%s", name, len(ours), len(user), in[i][0])
			continue
		}
		if ours[0].Type != TypeCloudConfig || !bytes.Equal(ours[0].Payload, gen) {
			t.Errorf("%s: first part is %s %q", name, ours[0].Type, ours[0].Payload)
		}
		if len(user) == 0 {
			t.Errorf("%s: cloud-init found nothing in the user data", name)
		}
		for j, u := range user {
			o := ours[j+1]
			if o.Type != u.Type || !bytes.Equal(o.Payload, u.Payload) || !eqPtr(o.MergeType, u.MergeType) || !eqPtr(o.LaunchIndex, u.LaunchIndex) {
				t.Errorf("%s: part %d is %s %q (merge %v), want %s %q (merge %v)", name, j+1, o.Type, o.Payload, deref(o.MergeType), u.Type, u.Payload, deref(u.MergeType))
			}
			// Names cloud-init makes up (part-001…) follow the count; a
			// name the user gave must survive.
			if u.Filename != nil && !strings.HasPrefix(*u.Filename, "part-") && !eqPtr(o.Filename, u.Filename) {
				t.Errorf("%s: part %d filename %v, want %v", name, j+1, deref(o.Filename), *u.Filename)
			}
		}
	}
}

func eqPtr(a, b *string) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func TestCombineCloudConfigMerges(t *testing.T) {
	gen, err := CloudConfig(loadSpec(t, minimalSpec, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{
		"#cloud-config\npackages: [git]\n",
		"#Cloud-Config\npackages: [git]\n",
		"  #cloud-config\npackages: [git]\n",
		gz("#cloud-config\npackages: [git]\n"),
	} {
		out, err := Combine(gen, []byte(user))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(out), "#cloud-config\n") || !strings.Contains(string(out), "packages: [git]") {
			t.Errorf("%q: not merged:\n%s", user, out)
		}
	}
	for _, user := range []string{"", "  \n", "#cloud-config\n", "#cloud-config\n# only a comment\n"} {
		out, err := Combine(gen, []byte(user))
		if err != nil || !bytes.Equal(out, gen) {
			t.Errorf("%q: got %q, %v; want the generated document", user, out, err)
		}
	}
}

func TestCombineRefusesWhatCloudInitIgnores(t *testing.T) {
	gen := []byte("#cloud-config\n{}\n")
	for user, want := range map[string]string{
		"hello world\n":            "does not recognise this user-data",
		"\xff\xfe binary":          "neither UTF-8 text nor gzip",
		"#cloud-config\n- a\n":     "must be a mapping",
		"#cloud-config\na: b: c\n": "not valid YAML",
	} {
		_, err := Combine(gen, []byte(user))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error containing %q", user, err, want)
		}
	}
}

func TestPartType(t *testing.T) {
	for in, want := range map[string]string{
		"#cloud-config\n":           TypeCloudConfig,
		"#cloud-config-archive\n":   TypeCloudConfigArchive,
		"#cloud-config-jsonp\n":     TypeCloudConfigJSONP,
		"#include-once\nhttp://x\n": TypeIncludeOnceURL,
		"#include http://x\n":       TypeIncludeURL,
		"#!/usr/bin/env python3\n":  TypeShellScript,
		" \n#Cloud-Boothook\n":      TypeCloudBoothook,
		"## template: jinja\n":      TypeJinja2,
		"#part-handler\n":           TypePartHandler,
		"# just a comment\n":        "",
		"":                          "",
	} {
		if got := PartType([]byte(in)); got != want {
			t.Errorf("PartType(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestUserDataNamesTheField(t *testing.T) {
	doc := minimalSpec + "  cloudInit:\n    userData: \"hello\"\n"
	_, err := UserData(loadSpec(t, doc, nil))
	if err == nil || !strings.HasPrefix(err.Error(), "spec.cloudInit.userData: ") {
		t.Fatalf("got %v", err)
	}
}

func TestCheckUserData(t *testing.T) {
	for in, want := range map[string]string{
		"":                                   "",
		"\n":                                 "",
		"#!/bin/sh\necho\n":                  "",
		"#cloud-config\na: 1\n":              "",
		"#cloud-config\nmerge_how: 'x(y)'\n": `unknown merger "x"`,
		"#cloud-config\n[a]\n":               "must be a mapping",
		gz("#cloud-config\na: 1\n"):          "",
		"text\n":                             "does not recognise",
		"MIME-Version: 1.0\n\n":              "",
	} {
		err := CheckUserData([]byte(in))
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("CheckUserData(%q) = %v, want %q", in, err, want)
		}
	}
}

// TestUserDataOnly: spec.cloudInit.userDataOnly writes the user's data as
// the whole user-data, what a guest without MIME support (CirrOS) runs.
func TestUserDataOnly(t *testing.T) {
	const script = "#!/bin/sh\necho hello > /run/hello\n"
	doc := minimalSpec + "  hostname: cirros\n  cloudInit:\n    userDataOnly: true\n    userData: |\n      #!/bin/sh\n      echo hello > /run/hello\n"
	ud, err := UserData(loadSpec(t, doc, nil))
	if err != nil {
		t.Fatal(err)
	}
	if string(ud) != script {
		t.Errorf("user-data %q, want the script alone", ud)
	}
	empty := minimalSpec + "  cloudInit:\n    userDataOnly: true\n"
	if ud, err := UserData(loadSpec(t, empty, nil)); err != nil || len(ud) != 0 {
		t.Errorf("no userData: %q %v, want empty user-data", ud, err)
	}
	// Data cloud-init ignores is what a platform delivered (KubeVirt's
	// quick-start "Hi."): given exactly, render.Instance warns about it.
	ignored := minimalSpec + "  cloudInit:\n    userDataOnly: true\n    userData: hello\n"
	if ud, err := UserData(loadSpec(t, ignored, nil)); err != nil || string(ud) != "hello" {
		t.Errorf("user-data cloud-init ignores: %q %v, want it as given", ud, err)
	}
}
