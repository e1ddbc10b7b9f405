package ignition

import (
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
	"testing"
)

// versionCorpus are user configs that each need a feature of one spec
// version (or a validation rule, or a translation that does not give the
// same config back), with warnings, with errors, and with list entries
// that carry nothing. TestVersionCorpus renders each, merged into two
// specs, with every Options.Version, and compares the outcome with
// testdata/version-corpus.golden (go test -run TestVersionCorpus -update
// rewrites it).
var versionCorpus = []struct{ name, config string }{
	{"plain file, declared 3.4", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/x","contents":{"source":"data:,x"}}]}}`},
	{"empty", `{"ignition":{"version":"3.0.0"}}`},
	{"proxy", `{"ignition":{"version":"3.1.0","proxy":{"httpsProxy":"https://proxy.example.com:3128","noProxy":["a.example.com"]}}}`},
	{"http headers", `{"ignition":{"version":"3.1.0"},"storage":{"files":[{"path":"/etc/x","contents":{"source":"https://example.com/x","httpHeaders":[{"name":"A","value":"b"}]}}]}}`},
	{"gs source", `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/x","contents":{"source":"gs://bucket/x"}}]}}`},
	{"sha256 verification", `{"ignition":{"version":"3.1.0"},"storage":{"files":[{"path":"/etc/x","contents":{"source":"https://example.com/x","verification":{"hash":"sha256-e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}}}]}}`},
	{"merge compression", `{"ignition":{"version":"3.1.0","config":{"merge":[{"source":"https://example.com/c.ign.gz","compression":"gzip"}]}}}`},
	{"mount options", `{"ignition":{"version":"3.1.0"},"storage":{"filesystems":[{"device":"/dev/vdb","format":"xfs","path":"/var/srv","mountOptions":["noatime"]}]}}`},
	{"user shouldExist", `{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"games","shouldExist":false}]}}`},
	{"group shouldExist", `{"ignition":{"version":"3.2.0"},"passwd":{"groups":[{"name":"games","shouldExist":false}]}}`},
	{"partition resize", `{"ignition":{"version":"3.2.0"},"storage":{"disks":[{"device":"/dev/vda","partitions":[{"number":4,"resize":true}]}]}}`},
	{"luks tpm2", `{"ignition":{"version":"3.2.0"},"storage":{"luks":[{"name":"root","device":"/dev/vda4","clevis":{"tpm2":true}}]}}`},
	{"s3 version id", `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/x","contents":{"source":"s3://bucket/x?versionId=1"}}]}}`},
	{"kernel arguments", `{"ignition":{"version":"3.3.0"},"kernelArguments":{"shouldExist":["quiet"]}}`},
	{"link without target", `{"ignition":{"version":"3.3.0"},"storage":{"links":[{"path":"/etc/l","hard":false,"target":"/etc/t"}]}}`},
	{"clevis custom", `{"ignition":{"version":"3.3.0"},"storage":{"luks":[{"name":"root","device":"/dev/vda4","clevis":{"custom":{"pin":"tpm2","config":"{}"}}}]}}`},
	{"luks discard", `{"ignition":{"version":"3.4.0"},"storage":{"luks":[{"name":"root","device":"/dev/vda4","discard":true,"clevis":{"tpm2":true}}]}}`},
	{"tang advertisement", `{"ignition":{"version":"3.4.0"},"storage":{"luks":[{"name":"root","device":"/dev/vda4","clevis":{"tang":[{"url":"http://tang","thumbprint":"x","advertisement":"{}"}]}}]}}`},
	{"s3 access point", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/x","contents":{"source":"arn:aws:s3:us-west-1:123456789012:accesspoint/test/object/some/path"}}]}}`},
	{"cex", `{"ignition":{"version":"3.5.0"},"storage":{"luks":[{"name":"root","device":"/dev/vda4","cex":{"enabled":true}}]}}`},
	{"setuid file", `{"ignition":{"version":"3.6.0"},"storage":{"files":[{"path":"/usr/local/bin/x","mode":2541,"contents":{"source":"data:,x"}}]}}`},
	{"sticky directory", `{"ignition":{"version":"3.6.0"},"storage":{"directories":[{"path":"/var/shared","mode":1023}]}}`},
	{"setuid file, declared 3.4", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/usr/local/bin/x","mode":2541,"contents":{"source":"data:,x"}}]}}`},
	{"instance unit without install", `{"ignition":{"version":"3.0.0"},"systemd":{"units":[{"name":"t@.service","contents":"[Service]\nExecStart=/bin/true\n"},{"name":"t@a.service","enabled":true}]}}`},
	{"unused key", `{"ignition":{"version":"3.2.0"},"bogus":1,"storage":{"filez":[]}}`},
	{"override hostname", `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/hostname","overwrite":true,"contents":{"source":"data:,override%0A"}}]},"systemd":{"units":[{"name":"app.service","enabled":false}]}}`},
	{"empty merge entry", `{"ignition":{"version":"3.4.0","config":{"merge":[{}]}}}`},
	{"empty CA entry", `{"ignition":{"version":"3.4.0","security":{"tls":{"certificateAuthorities":[{}]}}}}`},
	{"empty append entry", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/x","append":[{}]}]}}`},
	{"empty partition entry", `{"ignition":{"version":"3.4.0"},"storage":{"disks":[{"device":"/dev/vdb","partitions":[{}]}]}}`},
	{"empty tang entry", `{"ignition":{"version":"3.4.0"},"storage":{"luks":[{"name":"l","device":"/dev/vdc","clevis":{"tang":[{}],"tpm2":true}}]}}`},
	{"unused key in a file", `{"ignition":{"version":"3.0.0"},"storage":{"files":[{"path":"/etc/x","bogus":1,"contents":{"source":"data:,x"}}]}}`},
	{"gzip contents", `{"ignition":{"version":"3.0.0"},"storage":{"files":[{"path":"/etc/x","contents":{"compression":"gzip","source":"data:;base64,H4sIAAAAAAAC/6oEAAAA//8DAKtJpJIBAAAA"}}]}}`},
	{"nulls", `{"ignition":{"version":"3.1.0","config":null},"storage":{"files":[{"path":"/etc/x","contents":{"source":null},"mode":null,"user":{}}]},"passwd":null}`},
	{"users and groups", `{"ignition":{"version":"3.0.0"},"passwd":{"users":[{"name":"core","passwordHash":"$6$x","sshAuthorizedKeys":["ssh-ed25519 AAAA x"]},{"name":"bob","uid":1500,"groups":["wheel"]}],"groups":[{"name":"ops","gid":1600}]}}`},
	{"unicode and escapes", `{"ignition":{"version":"3.0.0"},"storage":{"files":[{"path":"/etc/ü","contents":{"source":"data:,%E2%9C%93%3C%3E%26"}}]},"systemd":{"units":[{"name":"u.service","contents":"[Service]\nExecStart=/bin/sh -c 'echo <&> \u2713'\n"}]}}`},
	{"large numbers", `{"ignition":{"version":"3.0.0","timeouts":{"httpTotal":9007199254740993}},"passwd":{"users":[{"name":"n","uid":4294967295}]}}`},
	{"version spelled 03.6.0", `{"ignition":{"version":"03.6.0"},"storage":{"files":[{"path":"/etc/x","contents":{"source":"data:,x"}}]}}`},
	{"version spelled 03.4.0", `{"ignition":{"version":"03.4.0"},"storage":{"files":[{"path":"/etc/x","contents":{"source":"data:,x"}}]}}`},
	{"version with metadata", `{"ignition":{"version":"3.6.0+x"}}`},
	{"key in another case", `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"Path":"/etc/x","contents":{"Source":"data:,x"}}]}}`},
	{"null sections", `{"ignition":{"version":"3.2.0"},"storage":null,"systemd":{"units":null}}`},
	{"duplicate keys", `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/x","path":"/etc/y","contents":{"source":"data:,x"}}]}}`},
	{"invalid", `{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"relative"}]}}`},
	{"through the generated link", `{"ignition":{"version":"3.0.0"},"storage":{"files":[{"path":"/etc/localtime/x"}]}}`},
	{"experimental", `{"ignition":{"version":"3.7.0-experimental"}}`},
}

func TestVersionCorpus(t *testing.T) {
	specs := []string{"../examples/fcos-server.yaml", "testdata/specs/merge-config.yaml", "testdata/specs/special-modes.yaml", "testdata/specs/merge-butane.yaml"}
	versions := append([]string{""}, Versions()...)
	var b strings.Builder
	for _, sp := range specs {
		for _, c := range versionCorpus {
			for _, v := range versions {
				inst := load(t, sp)
				inst.Spec.Ignition.Config = c.config
				variant := FCOS
				if strings.HasPrefix(v, "2.") {
					variant = Flatcar
				}
				res, err := Render(inst, Options{Version: v, Variant: variant})
				fmt.Fprintf(&b, "%s | %s | %q:\n", sp, c.name, v)
				if err != nil {
					fmt.Fprintf(&b, "\terror: %v\n", err)
					continue
				}
				fmt.Fprintf(&b, "\t%s %x\n", res.Version, sha256.Sum256(res.Config))
				for _, w := range res.Warnings {
					fmt.Fprintf(&b, "\twarning: %s\n", w)
				}
			}
		}
	}
	const golden = "testdata/version-corpus.golden"
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("line %d:\ngot  %s\nwant %s", i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("got %d lines, want %d", len(gl), len(wl))
	}
}
