package platform_test

// The corpus: the platforms' own published objects (issue 20), kept as
// published under testdata/corpus/PLATFORM/, one file per source document,
// each naming its source on its first line (or in a NAME.source sidecar).
// runCorpus reads every file of one platform's directory the way
// `vminit build FILE` does and compares the outcome with the platform's
// expect.txt, one line per file:
//
//	FILE builds AGENT/DATASOURCE            [  # note]
//	FILE refused: ERROR SUBSTRING             # CATEGORY: reason
//	FILE skipped: why
//
// A refusal carries one of the categories below; issue20 lines are what
// vminit gets wrong today and flip to "builds" as issue 20 is fixed. Run
//
//	go test ./platform -run Corpus -update-corpus
//
// to rewrite the outcomes (annotations are kept; a new refusal gets
// "# TODO: categorise", which fails the test until categorised).

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/vminit/vminit/check"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/convert"
	"github.com/vminit/vminit/spec"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/corpus/*/expect.txt with today's outcomes, keeping annotations")

// corpusCategories are the annotations a refusal may carry.
var corpusCategories = []string{
	// The object is invalid for the platform itself: it must stay refused.
	"upstream-invalid:",
	// vminit is wrong today (issue 20's item number and what it gets wrong).
	"issue20:",
	// The published document is not whole: it relies on objects
	// published elsewhere (another block of the same page, a cluster).
	"incomplete:",
}

// corpusMaxMessage bounds the error substring -update-corpus records.
const corpusMaxMessage = 160

// corpusOutcome runs what `vminit build` runs on the file name holding
// data (internal/app/cli: load, loadOne, check.Instance with the build's
// lenient target) and says how it ends: "builds AGENT/DATASOURCE" or
// "refused: FIRST ERROR LINE".
func corpusOutcome(name string, data []byte) string {
	ds, err := platform.Split(name, data)
	var results []*platform.Result
	if err == nil && slices.ContainsFunc(ds, func(d *platform.Document) bool {
		return convert.For(d) != nil || platform.IsReferenced(d)
	}) {
		results, err = convert.Documents(context.Background(), ds, platform.Options{})
		if err != nil {
			return refused(err)
		}
	} else {
		// The CLI reads anything else as a vminit spec.
		inst, err := spec.Loader{}.Parse(data, ".")
		for _, e := range spec.AsErrors(err) {
			e.File = name
		}
		if err != nil {
			return refused(err)
		}
		results = []*platform.Result{{Object: name, Instance: inst}}
	}
	switch len(results) {
	case 0:
		return "refused: no vminit Instance and no VM among the objects"
	case 1:
	default:
		names := make([]string, len(results))
		for i, r := range results {
			names[i] = r.Object
		}
		return fmt.Sprintf("refused: %d VMs (%s); this command makes one", len(results), strings.Join(names, "; "))
	}
	r := results[0]
	if r.Instance == nil {
		return "builds sysprep"
	}
	t := check.Target{LenientSchema: true}
	rep := check.Instance(r.Instance, t)
	if !rep.OK() {
		return refused(rep.Errors)
	}
	if r.Instance.Spec.Agent == spec.AgentIgnition {
		return "builds ignition/" + string(r.Instance.Spec.Ignition.Variant)
	}
	out := "builds cloud-init/" + string(t.DatasourceFor(r.Instance))
	if r.Sysprep != nil {
		out += "+sysprep"
	}
	return out
}

// refused gives every line of err's message, sorted (a few of vminit's
// conversions report map-ordered problems in no fixed order): the outcome
// matches an expectation when any of them holds its substring, and
// -update-corpus records the first, cut to corpusMaxMessage.
func refused(err error) string {
	lines := strings.Split(err.Error(), "\n")
	sort.Strings(lines)
	for i, msg := range lines {
		if len(msg) > corpusMaxMessage {
			msg = msg[:corpusMaxMessage]
			for !utf8.ValidString(msg) {
				msg = msg[:len(msg)-1]
			}
		}
		lines[i] = msg
	}
	return "refused: " + strings.Join(lines, "\n")
}

// refusedMatches reports whether outcome (from corpusOutcome) is a
// refusal one of whose lines holds want's substring.
func refusedMatches(outcome, want string) bool {
	sub, ok := strings.CutPrefix(want, "refused: ")
	if !ok || !strings.HasPrefix(outcome, "refused: ") {
		return false
	}
	for _, l := range strings.Split(strings.TrimPrefix(outcome, "refused: "), "\n") {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

// firstLine is the outcome as -update-corpus records it.
func firstLine(outcome string) string {
	l, _, _ := strings.Cut(outcome, "\n")
	return l
}

// corpusLine is one line of expect.txt.
type corpusLine struct {
	file, outcome, note string
}

func (l corpusLine) String() string {
	s := l.file + " " + l.outcome
	if l.note != "" {
		s += "  # " + l.note
	}
	return s
}

func readExpect(t *testing.T, path string) (header []string, lines []corpusLine) {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		s := sc.Text()
		if strings.TrimSpace(s) == "" || strings.HasPrefix(s, "#") {
			if lines == nil {
				header = append(header, s)
			}
			continue
		}
		file, rest, ok := strings.Cut(s, " ")
		if !ok {
			t.Fatalf("%s: %q: want FILE OUTCOME", path, s)
		}
		outcome, note, _ := strings.Cut(rest, "  # ")
		lines = append(lines, corpusLine{file, strings.TrimSpace(outcome), strings.TrimSpace(note)})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return header, lines
}

// corpusFiles are the corpus documents of dir: everything but expect.txt,
// source sidecars and clusterctl variables.
func corpusFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || n == "expect.txt" || strings.HasSuffix(n, ".source") || strings.HasSuffix(n, ".env") || strings.HasSuffix(n, ".md") {
			continue
		}
		out = append(out, n)
	}
	return out
}

// runCorpus checks every file of testdata/corpus/plat against its
// expect.txt and logs a summary.
func runCorpus(t *testing.T, plat string) {
	dir := filepath.Join("testdata", "corpus", plat)
	expectPath := filepath.Join(dir, "expect.txt")
	header, lines := readExpect(t, expectPath)
	want := map[string]corpusLine{}
	for _, l := range lines {
		if _, dup := want[l.file]; dup {
			t.Errorf("%s: %s listed twice", expectPath, l.file)
		}
		want[l.file] = l
	}
	files := corpusFiles(t, dir)
	var got []corpusLine
	counts := map[string]int{}
	for _, name := range files {
		l, listed := want[name]
		if !listed {
			t.Errorf("%s: not in %s", name, expectPath)
			l = corpusLine{file: name}
		}
		delete(want, name)
		if strings.HasPrefix(l.outcome, "skipped:") {
			got = append(got, l)
			counts["skipped"]++
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !hasSource(dir, name, data) {
			t.Errorf("%s: names no source (a first-line # source: comment or a %s.source file)", name, name)
		}
		out := corpusOutcome(name, data)
		switch {
		case strings.HasPrefix(out, "builds"):
			counts["build"]++
			if out != l.outcome {
				t.Errorf("%s: %s, want %s", name, out, l.outcome)
			}
		case refusedMatches(out, l.outcome):
			out = l.outcome // the listed substring still matches: keep it
			counts["refused "+category(l.note)]++
		default:
			counts["refused "+category(l.note)]++
			out = firstLine(out)
			t.Errorf("%s: %s, want %s", name, out, l.outcome)
		}
		if strings.HasPrefix(out, "refused") && category(l.note) == "" {
			t.Errorf("%s: refused without a category (%s) in %s", name, strings.Join(corpusCategories, ", "), expectPath)
		}
		nl := corpusLine{name, out, l.note}
		if strings.HasPrefix(out, "refused") && nl.note == "" {
			nl.note = "TODO: categorise"
		}
		got = append(got, nl)
	}
	for name := range want {
		t.Errorf("%s: listed in %s, but no such file", name, expectPath)
	}
	var sum []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		sum = append(sum, fmt.Sprintf("%d %s", counts[k], k))
	}
	t.Logf("corpus %s: %d files: %s", plat, len(files), strings.Join(sum, ", "))
	if *updateCorpus {
		sort.Slice(got, func(i, j int) bool { return got[i].file < got[j].file })
		var b strings.Builder
		for _, h := range header {
			b.WriteString(h + "\n")
		}
		for _, l := range got {
			b.WriteString(l.String() + "\n")
		}
		if err := os.WriteFile(expectPath, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func category(note string) string {
	for _, c := range corpusCategories {
		if strings.HasPrefix(note, c) {
			return strings.TrimSuffix(c, ":")
		}
	}
	return ""
}

func hasSource(dir, name string, data []byte) bool {
	if strings.HasPrefix(string(data), "# source: ") {
		return true
	}
	_, err := os.Stat(filepath.Join(dir, name+".source"))
	return err == nil
}
