package spec

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// FuzzNameChecks holds the hand-written name checks to the regular
// expressions they replace.
func FuzzNameChecks(f *testing.F) {
	labelRE := regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	userRE := regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,30}\$?$`)
	for _, s := range []string{"", "a", "-", "a-", "-a", "a-b", "web01", "A", "_", "_a$", "$", "a$$", "a\n",
		strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("u", 31) + "$", strings.Repeat("u", 32), "0ps", "o.ps", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validLabel(s), labelRE.MatchString(s); got != want {
			t.Errorf("validLabel(%q) = %v; the expression says %v", s, got, want)
		}
		if got, want := validUserName(s), userRE.MatchString(s); got != want {
			t.Errorf("validUserName(%q) = %v; the expression says %v", s, got, want)
		}
	})
}

// TestUnitSyntax: unit text systemd cannot read is refused by the spec,
// naming the field, for every agent (Ignition's validator reported it only
// as an internal error after rendering; cloud-init wrote it as it was).
func TestUnitSyntax(t *testing.T) {
	doc := "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: u}\nspec:\n  units:\n    - name: a.service\n      content: \"[Unit\"\n    - name: b.service\n      content: \"[Unit]\\nDescription=b\\n\"\n      dropins:\n        - {name: x.conf, content: \"[Service\"}\n"
	_, err := Parse([]byte(doc), "")
	got := fmt.Sprint(err)
	for _, want := range []string{"spec.units[0].content: not a systemd unit file", "spec.units[1].dropins[0].content: not a systemd unit file"} {
		if !strings.Contains(got, want) {
			t.Errorf("%v lacks %q", err, want)
		}
	}
}

// TestMetadataServerWithoutAddresses: a metadataServer block without
// addresses is refused where addresses are the only identity (a forgotten
// one would serve the instance to nobody), and accepted, its options
// kept, where the platform identifies the instance (a cluster's VMIs).
func TestMetadataServerWithoutAddresses(t *testing.T) {
	doc := []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: vm}\nspec:\n  metadataServer: {imdsv2: required, tokenHopLimit: 2}\n")
	if _, err := Parse(doc, ""); err == nil || !strings.Contains(err.Error(), "spec.metadataServer.addresses") {
		t.Errorf("Parse: %v, want spec.metadataServer.addresses required", err)
	}
	inst, err := Loader{IdentifiedByPlatform: true}.Parse(doc, "")
	if err != nil {
		t.Fatal(err)
	}
	if ms := inst.Spec.MetadataServer; ms.IMDSv2 != "required" || ms.TokenHopLimit != 2 || len(ms.Addresses) != 0 {
		t.Errorf("metadataServer %+v", ms)
	}
	bad := []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: vm}\nspec:\n  metadataServer: {imdsv2: maybe, tokenHopLimit: 99}\n")
	_, err = Loader{IdentifiedByPlatform: true}.Parse(bad, "")
	if err == nil || !strings.Contains(err.Error(), "imdsv2") || !strings.Contains(err.Error(), "tokenHopLimit") || strings.Contains(err.Error(), "addresses") {
		t.Errorf("options still checked, addresses not required: %v", err)
	}
}
