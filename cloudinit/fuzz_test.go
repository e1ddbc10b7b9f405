package cloudinit

import (
	"bytes"
	"io"
	"mime"
	mimemultipart "mime/multipart"
	"net/mail"
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzMerge merges arbitrary documents into a generated one. It must never
// panic; when it succeeds, the result must be one YAML mapping that merges
// again (into an empty document) to itself, as cloud-init re-reads it.
func FuzzMerge(f *testing.F) {
	for _, c := range mergeCases {
		f.Add(c.overlay)
	}
	f.Add("#cloud-config\na: &x [1, *x]\n")
	f.Add("#cloud-config\n<<: {a: 1}\n<<: [{b: 2}]\n")
	f.Add("#cloud-config\n? [a, b]\n: c\n")
	f.Add("#cloud-config\nmerge_how: [[], {name: 1}]\n")
	f.Fuzz(func(t *testing.T, overlay string) {
		out, err := MergeCloudConfig([]byte(mergeBase), []byte(overlay))
		if err != nil {
			return
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(out, &doc); err != nil {
			t.Fatalf("merged output is not YAML: %v\n%s", err, out)
		}
		n, err := normalize(out)
		if err != nil {
			t.Fatalf("merged output does not load: %v\n%s", err, out)
		}
		if n == nil || kindOf(n) != pyDict {
			t.Fatalf("merged output is not a mapping:\n%s", out)
		}
		again, err := MergeCloudConfig([]byte("#cloud-config\n"), out)
		if err != nil {
			t.Fatalf("merged output does not merge again: %v\n%s", err, out)
		}
		if string(again) != string(out) {
			t.Fatalf("merging the output into nothing changes it:\n%s\n---\n%s", out, again)
		}
	})
}

// FuzzCombine combines arbitrary user-data with a generated document. It
// must never panic; a multipart result must parse (Go's mime/multipart
// stands in for Python's email package here; TestCombineMIMEParts checks
// the real one) into the generated part followed by the user's data.
func FuzzCombine(f *testing.F) {
	for _, s := range []string{"#!/bin/sh\necho hi\n", "#cloud-config\na: 1\n", "#include\nhttp://x\n", "## template: jinja\n{{ x }}", "MIME-Version: 1.0\nContent-Type: text/x-shellscript\n\n#!/bin/sh\n", "#cloud-config-archive\n- a\n", "\x1f\x8b", "--vminit-"} {
		f.Add([]byte(s))
	}
	gen := []byte("#cloud-config\nhostname: x\n")
	f.Fuzz(func(t *testing.T, user []byte) {
		out, err := Combine(gen, user)
		if err != nil {
			return
		}
		head, body, ok := bytes.Cut(out, []byte("\n\n"))
		if !bytes.HasPrefix(head, []byte("Content-Type: multipart/mixed")) {
			return // merged, checked by FuzzMerge
		}
		if u, _ := gunzip(user); isMIME(u) {
			// A user's message is nested as given, and Python's parser
			// takes liberties (headers without a blank line after them)
			// that Go's does not.
			return
		}
		msg, err := mail.ReadMessage(bytes.NewReader(out))
		if err != nil || !ok {
			t.Fatalf("not a message: %v\n%s", err, out)
		}
		_, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
		if err != nil {
			t.Fatal(err)
		}
		r := mimemultipart.NewReader(bytes.NewReader(body), params["boundary"])
		var n int
		for {
			p, err := r.NextRawPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("part %d: %v\n%q", n, err, out)
			}
			data, _ := io.ReadAll(p)
			if n == 0 && !bytes.Equal(data, gen) {
				t.Fatalf("first part %q", data)
			}
			n++
		}
		if n != 2 {
			t.Fatalf("%d parts in\n%q", n, out)
		}
	})
}
