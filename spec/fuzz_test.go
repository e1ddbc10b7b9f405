package spec_test

import (
	"os"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/spec"
)

// FuzzDecode feeds arbitrary documents to the decoder and validator: they
// must never panic, and a document that decodes and validates must survive
// a marshal/decode round trip.
func FuzzDecode(f *testing.F) {
	for _, p := range []string{"../examples/ubuntu-server/instance.yaml", "../examples/dev-vm.yaml"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(header + "spec:\n  commands: [[a, b], c]\n  files: [{path: /a, mode: 0644}]\n"))
	f.Add([]byte("{}"))
	f.Add([]byte("&a [*a]"))
	f.Add([]byte(header + "spec:\n  network: {ethernets: {e: {match: {macAddress: '00:11:22:33:44:55'}, routes: [{to: default, via: 1.2.3.4}]}}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, _, err := spec.Decode(data)
		if err != nil || in == nil {
			return
		}
		in.Default()
		if in.Validate() != nil {
			return
		}
		out, err := yaml.Marshal(in)
		if err != nil {
			t.Fatalf("marshal of a valid instance: %v", err)
		}
		in2, _, err := spec.Decode(out)
		if err != nil {
			t.Fatalf("re-decoding a valid instance: %v\n%s", err, out)
		}
		in2.Default()
		if err := in2.Validate(); err != nil {
			t.Fatalf("round trip made a valid instance invalid: %v\n%s", err, out)
		}
	})
}

// FuzzDecodeQuotes: whatever a document holds, an error quotes at most
// 64 bytes of an unknown key, and a document that is no spec is refused
// with one error that quotes nothing.
func FuzzDecodeQuotes(f *testing.F) {
	f.Add([]byte("root:$6$x:19000:0:99999:7:::\nsshd:!:19000::::::\n"))
	f.Add([]byte(header + strings.Repeat("k", 200) + ": 1\n"))
	f.Add([]byte(header + "spec:\n  \"a\\u0000b\": 1\n"))
	f.Add([]byte("- a\n- b\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _, err := spec.Decode(data)
		es := spec.AsErrors(err)
		for _, e := range es {
			switch {
			case strings.HasPrefix(e.Message, "unknown field"):
				if key := e.Field[strings.LastIndexAny(e.Field, ".]")+1:]; len(key) > 64+len("…") {
					t.Fatalf("an unknown key quoted whole: %q", e.Field)
				}
			case strings.HasPrefix(e.Message, "not a vminit spec"):
				if len(es) != 1 || e.Field != "" {
					t.Fatalf("a document that is no spec: %v", es)
				}
			}
		}
	})
}
