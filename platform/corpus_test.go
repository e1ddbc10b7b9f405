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
//	FILE#KIND/NAME OUTCOME                    [  # note]
//
// A FILE#KIND/NAME line is one object of a file that holds several kinds or
// several objects vminit reads, built alone with the file's Secrets and
// ConfigMaps (what `build --object` would give once issue 20 item 1 skips
// the other kinds); platforms whose corpus mixes kinds (Cluster API's
// templates) ask for them with corpusPlatform.Objects. A platform may also
// give build options (the flags its users give: oVirt's --password-salt)
// and prepare each file as its users do before vminit reads it (clusterctl's
// variable substitution).
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
	return corpusOutcomeWith(name, data, platform.Options{})
}

// corpusOutcomeWith is corpusOutcome with build options.
func corpusOutcomeWith(name string, data []byte, opts platform.Options) string {
	ds, err := platform.Split(name, data)
	var results []*platform.Result
	if err == nil && slices.ContainsFunc(ds, func(d *platform.Document) bool {
		return convert.For(d) != nil || platform.IsReferenced(d)
	}) {
		results, err = convert.Documents(context.Background(), ds, opts)
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
	return resultOutcome(results[0])
}

// resultOutcome is how `vminit build` ends with one converted object.
func resultOutcome(r *platform.Result) string {
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

// corpusObjectOutcomes gives, when the file holds several objects vminit
// reads or is refused for holding a kind it does not read, the outcome of
// each object vminit reads, converted alone with the file's Secrets and
// ConfigMaps, keyed FILE#KIND/NAME; nil otherwise.
func corpusObjectOutcomes(name string, data []byte, fileOutcome string, opts platform.Options) (keys, outcomes []string) {
	docs, err := platform.Split(name, data)
	if err != nil {
		return nil, nil
	}
	var objs, refs []*platform.Document
	for _, d := range docs {
		switch {
		case convert.For(d) != nil:
			objs = append(objs, d)
		case platform.IsReferenced(d):
			refs = append(refs, d)
		}
	}
	if len(objs) == 0 || len(objs) == 1 && !strings.Contains(fileOutcome, "is not an object vminit reads") {
		return nil, nil
	}
	for _, d := range objs {
		out := ""
		rs, err := convert.Documents(context.Background(), append(slices.Clip(refs), d), opts)
		switch {
		case err != nil:
			out = refused(err)
		case len(rs) != 1:
			out = fmt.Sprintf("refused: %d results", len(rs))
		default:
			out = resultOutcome(rs[0])
		}
		keys = append(keys, name+"#"+d.Kind+"/"+d.Name)
		outcomes = append(outcomes, out)
	}
	return keys, outcomes
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

// corpusPlatform says how to read one platform's corpus.
type corpusPlatform struct {
	// Dir is the directory under testdata/corpus.
	Dir string
	// Opts are the build options the platform's users give.
	Opts platform.Options
	// Prepare turns a file as published into what its users give vminit
	// (clusterctl generate's substitution); nil keeps it.
	Prepare func(data []byte) ([]byte, error)
	// Objects adds a FILE#KIND/NAME line for each object vminit reads of a
	// file of several kinds or objects.
	Objects bool
}

// runCorpus checks every file of testdata/corpus/plat against its
// expect.txt and logs a summary.
func runCorpus(t *testing.T, plat string) { runCorpusWith(t, corpusPlatform{Dir: plat}) }

// runCorpusWith is runCorpus with the platform's options.
func runCorpusWith(t *testing.T, p corpusPlatform) {
	plat := p.Dir
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
	// check compares the outcome out of key (a file, or FILE#KIND/NAME)
	// with its line, and records the line -update-corpus writes.
	check := func(key, out, prefix string) {
		l, listed := want[key]
		if !listed {
			t.Errorf("%s: not in %s (today: %s)", key, expectPath, firstLine(out))
			l = corpusLine{file: key}
		}
		delete(want, key)
		switch {
		case strings.HasPrefix(out, "builds"):
			counts[prefix+"build"]++
			if out != l.outcome {
				t.Errorf("%s: %s, want %s", key, out, l.outcome)
			}
		case refusedMatches(out, l.outcome):
			out = l.outcome // the listed substring still matches: keep it
			counts[prefix+"refused "+category(l.note)]++
		default:
			counts[prefix+"refused "+category(l.note)]++
			out = firstLine(out)
			t.Errorf("%s: %s, want %s", key, out, l.outcome)
		}
		if strings.HasPrefix(out, "refused") && category(l.note) == "" {
			t.Errorf("%s: refused without a category (%s) in %s", key, strings.Join(corpusCategories, ", "), expectPath)
		}
		nl := corpusLine{key, out, l.note}
		if strings.HasPrefix(out, "refused") && nl.note == "" {
			nl.note = "TODO: categorise"
		}
		got = append(got, nl)
	}
	for _, name := range files {
		if l, listed := want[name]; listed && strings.HasPrefix(l.outcome, "skipped:") {
			delete(want, name)
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
		if p.Prepare != nil {
			if data, err = p.Prepare(data); err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
		}
		out := corpusOutcomeWith(name, data, p.Opts)
		check(name, out, "")
		if p.Objects {
			keys, outs := corpusObjectOutcomes(name, data, out, p.Opts)
			for i := range keys {
				check(keys[i], outs[i], "objects alone: ")
			}
		}
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
