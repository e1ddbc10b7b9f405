package seed

import (
	"strings"
	"testing"

	"github.com/vminit/vminit/bootreport"
)

// TestReportTo: Options.ReportTo puts the first-boot report in the user
// data of every datasource, and only there; BuildError agrees with Build;
// a bad URL is an error naming it.
func TestReportTo(t *testing.T) {
	const base = "http://192.0.2.1:8080"
	for _, name := range []string{"dev-vm", "script"} {
		inst := load(t, name)
		for _, ds := range Datasources {
			s, err := Build(inst, ds, Options{ReportTo: base})
			if err != nil {
				t.Fatalf("%s %s: %v", name, ds, err)
			}
			for _, f := range s.Files {
				has := strings.Contains(string(f.Data), base+bootreport.EventsPath)
				if has != (f.Path == ds.UserDataPath()) {
					t.Errorf("%s %s: %s has the report: %v", name, ds, f.Path, has)
				}
			}
			if err := BuildError(inst, ds, Options{ReportTo: base}); err != nil {
				t.Errorf("%s %s: BuildError: %v", name, ds, err)
			}
		}
	}
	opts := Options{ReportTo: "http://u:p@192.0.2.1/"}
	if _, err := Build(load(t, "dev-vm"), NoCloud, opts); err == nil || !strings.Contains(err.Error(), opts.ReportTo) {
		t.Errorf("a bad URL: %v", err)
	}
	if err := BuildError(load(t, "dev-vm"), NoCloud, opts); err == nil {
		t.Errorf("BuildError accepts a bad URL")
	}
}
