package mdserver

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/vminit/vminit/spec"
)

// The docs that list the dialects by hand, each a table: docs/spec.md's
// spec.metadataServer row of `dialects`, and docs/run.md's table of what
// `vminit run --serve --dialect` offers.
const (
	specDoc, specRow = "../docs/spec.md", "| `dialects` |"
	runDoc, runTable = "../docs/run.md", "| Dialect (`--dialect`) |"
)

// dialectDocProblems are the ways the docs' lists of dialects differ
// from ds: the `dialects` row of specMD not listing ds's names, in their
// order ("`ec2`, `openstack`, … ."; the row names some again in prose); an
// agent's --dialect (DialectReader: its As, else the dialect's name) that
// no row of runMD's table names in its first cell (an Ignition platform on
// the Ignition row, a cloud-init dialect on a row of its own); a name in
// that first cell that no reader has.
func dialectDocProblems(ds []DialectInfo, specMD, runMD string) []string {
	var problems []string
	var names []string
	for _, d := range ds {
		names = append(names, "`"+d.Name+"`")
	}
	list := strings.Join(names, ", ") + "."
	if row := tableRows(specMD, specRow); len(row) == 0 || !strings.Contains(row[0], list) {
		problems = append(problems, specDoc+": the `dialects` row does not list "+list)
	}
	type option struct{ name, agent string }
	var offered []option
	for _, d := range ds {
		for _, r := range d.Readers {
			name := r.As
			if name == "" {
				name = d.Name
			}
			offered = append(offered, option{name, r.Agent})
		}
	}
	rows := tableRows(runMD, runTable)
	if len(rows) == 0 {
		return append(problems, runDoc+": no table headed "+runTable)
	}
	var listed []option
	for _, r := range rows[2:] { // past the header and its rule
		first, _, _ := strings.Cut(strings.TrimPrefix(r, "|"), "|")
		agent := spec.AgentCloudInit
		if strings.HasPrefix(strings.TrimSpace(first), "Ignition") {
			agent = spec.AgentIgnition
		}
		for i, part := range strings.Split(first, "`") {
			if i%2 == 1 {
				listed = append(listed, option{part, agent})
			}
		}
	}
	for _, o := range offered {
		if !slices.Contains(listed, o) {
			problems = append(problems, runDoc+": the dialect table does not list "+o.agent+"'s --dialect "+o.name)
		}
	}
	for _, o := range listed {
		if !slices.Contains(offered, o) {
			problems = append(problems, runDoc+": the dialect table lists "+o.agent+"'s --dialect "+o.name+", which no dialect offers")
		}
	}
	return problems
}

// tableRows are the lines of md's table that starts with the line
// beginning with head (that line included), or of that line alone when it
// is a row of a table begun above; nil when no line begins so.
func tableRows(md, head string) []string {
	lines := strings.Split(md, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, head) {
			continue
		}
		if i > 0 && strings.HasPrefix(lines[i-1], "|") {
			return []string{l}
		}
		j := i
		for j < len(lines) && strings.HasPrefix(lines[j], "|") {
			j++
		}
		return lines[i:j]
	}
	return nil
}

// TestDialectsDocumented: the docs that list dialects by hand list every
// dialect the registry holds (Dialects), and every --dialect vminit run
// offers for it: the program reads the registry, the docs cannot, so
// this is what keeps them from drifting. The toy dialect, registered by
// these tests alone, proves the check bites: it is reported missing from
// both docs.
func TestDialectsDocumented(t *testing.T) {
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	specMD, runMD := read(specDoc), read(runDoc)
	var real []DialectInfo
	for _, d := range Dialects() {
		if !slices.Contains(testDialects, d.Name) {
			real = append(real, d)
		}
	}
	for _, p := range dialectDocProblems(real, specMD, runMD) {
		t.Errorf("%s (the registry: mdserver.Dialects)", p)
	}

	got := dialectDocProblems(Dialects(), specMD, runMD)
	var all []string
	for _, d := range Dialects() {
		all = append(all, "`"+d.Name+"`")
	}
	want := []string{specDoc + ": the `dialects` row does not list " + strings.Join(all, ", ") + ".", runDoc + ": the dialect table does not list cloud-init's --dialect toy"}
	if !slices.Equal(got, want) {
		t.Errorf("with the toy dialect registered: %q, want %q", got, want)
	}
}
