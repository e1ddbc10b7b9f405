package sysprep_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/vminit/vminit/platform/sysprep"
)

// TestDiscCheck: a disc's answer files are found whatever their case; an
// XML one is read (its passes reported, or its line when it is not
// well-formed), one that is not XML is reported unread; a disc without
// one is an error naming what it has.
func TestDiscCheck(t *testing.T) {
	d := sysprep.Disc{Answers: []string{"Unattend.xml", "sysprep.inf"}, How: "on a test disc"}
	ok := []byte(`<unattend xmlns="urn:schemas-microsoft-com:unattend"><settings pass="oobeSystem"><component name="Microsoft-Windows-Shell-Setup"/></settings></unattend>`)
	for _, c := range []struct {
		disc        fstest.MapFS
		report, err string
	}{
		{fstest.MapFS{"UNATTEND.XML": {Data: ok}}, "UNATTEND.XML passed through on a test disc: well-formed XML configuring oobeSystem (Microsoft-Windows-Shell-Setup)", ""},
		{fstest.MapFS{"sysprep.inf": {Data: []byte("[Unattended]\n")}}, "sysprep.inf passed through on a test disc: not XML", ""},
		{fstest.MapFS{"Unattend.xml": {Data: []byte("<unattend>\n<settings>\n</unattend>\n")}}, "", "Unattend.xml is not well-formed XML: Windows setup would stop on it: line 3"},
		{fstest.MapFS{"user-data": {Data: []byte("#cloud-config\n")}}, "", "no Unattend.xml or sysprep.inf (the disc has user-data)"},
	} {
		if holds := d.Holds(c.disc); holds == strings.HasPrefix(c.err, "no ") {
			t.Errorf("%v: Holds %v", c.disc, holds)
		}
		reports, err := d.Check(c.disc)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: error %v, want %q", c.disc, err, c.err)
			}
			continue
		}
		if err != nil || len(reports) != 1 || !strings.HasPrefix(reports[0], c.report) {
			t.Errorf("%v: %q %v, want %q", c.disc, reports, err, c.report)
		}
	}
}
