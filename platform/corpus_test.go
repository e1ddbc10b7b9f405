package platform_test

// The corpus: the platforms' own published objects, one file per
// source document under testdata/corpus/PLATFORM/, each naming its source
// (a first-line "# source:" comment, or a NAME.source sidecar for XML and
// JSON). Each platform's test (corpus_PLATFORM_test.go) runs runCorpus over
// its directory; this file holds what they share: reading a file the way
// `vminit build FILE` does, and the expectations format.
//
// testdata/corpus/PLATFORM/expect.txt has one line per corpus file:
//
//	FILE builds: AGENT/DATASOURCE [-- NOTE]
//	FILE refused: ERROR SUBSTRING -- CATEGORY: WHY
//	FILE skipped: WHY
//
// where CATEGORY is "upstream-invalid" (the platform itself rejects the
// object: it must stay refused), "by-design" (vminit refuses it on purpose
// and says what to give instead, e.g. --object for a file of several VMs:
// it stays refused) or "gap" (vminit cannot do what the platform does yet;
// the line flips when it can). A builds line may carry a note saying how
// what it builds was checked. Blank lines and lines starting with # are
// comments. The test fails when an outcome differs from its line, when a
// file has no line or a line no file, and when a refusal has no category.
//
//	go test ./platform -run Corpus -update-corpus
//
// rewrites the outcomes of expect.txt keeping each line's annotation (a new
// refusal gets "-- gap: TODO", which fails until it is categorised),
// and the count docs/platforms/PLATFORM.md states (checkDocCount).

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/vminit/vminit/media"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/convert"
	"github.com/vminit/vminit/render"
	"github.com/vminit/vminit/spec"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the outcomes in testdata/corpus/*/expect.txt, keeping their annotations")

// corpusPlatform says how to run one platform's corpus directory.
type corpusPlatform struct {
	// Dir is the directory under testdata/corpus.
	Dir string
	// Opts are the options a user of this platform gives vminit build
	// (the flags its messages ask for).
	Opts platform.Options
	// Prepare turns a file as published into what the user gives vminit
	// (clusterctl's variable substitution); nil keeps it.
	Prepare func(name string, data []byte) ([]byte, error)
	// Ignore reports the files of Dir that are no corpus objects
	// (sidecars, variables); expect.txt and *.source always are.
	Ignore func(name string) bool
}

// corpusLine is one line of expect.txt.
type corpusLine struct {
	File    string
	Verdict string // builds, refused or skipped
	Detail  string // builds: agent/datasource; refused: error substring; skipped: why
	Note    string // after " -- "
}

func (l corpusLine) String() string {
	s := l.File + " " + l.Verdict + ": " + l.Detail
	if l.Note != "" {
		s += " -- " + l.Note
	}
	return s
}

// corpusCategories are the reasons a refusal may have (see the format
// above).
var corpusCategories = []string{"upstream-invalid", "by-design", "gap"}

// category is the note's category (one of corpusCategories), or "" when
// it has none.
func (l corpusLine) category() string {
	c, _, ok := strings.Cut(l.Note, ":")
	if !ok || !slices.Contains(corpusCategories, strings.TrimSpace(c)) {
		return ""
	}
	return strings.TrimSpace(c)
}

func parseCorpusLine(s string) (corpusLine, error) {
	var l corpusLine
	main, note, _ := strings.Cut(s, " -- ")
	l.Note = strings.TrimSpace(note)
	file, rest, ok := strings.Cut(strings.TrimSpace(main), " ")
	if !ok {
		return l, fmt.Errorf("%q: want FILE VERDICT: DETAIL", s)
	}
	l.File = file
	verdict, detail, ok := strings.Cut(strings.TrimSpace(rest), ":")
	if !ok {
		return l, fmt.Errorf("%q: want FILE VERDICT: DETAIL", s)
	}
	l.Verdict, l.Detail = verdict, strings.TrimSpace(detail)
	switch l.Verdict {
	case "builds", "refused", "skipped":
	default:
		return l, fmt.Errorf("%q: verdict %q: want builds, refused or skipped", s, verdict)
	}
	return l, nil
}

// corpusOutcome is what vminit build does with one file (or, Key
// FILE#KIND/NAME, with one object of a file) today.
type corpusOutcome struct {
	Key     string
	Verdict string // builds or refused
	Detail  string // agent/datasource, or the first problem
	Err     string // the whole error, for matching substrings
	// Cause is the refusal's error; nil for a refusal of the whole file
	// (several VMs), which is no object's.
	Cause error
	// RoundTrip is, for an object that builds, how building the spec
	// `convert --to spec` prints differs from building the object ("":
	// the same bytes).
	RoundTrip string
}

// buildOutcomes reads data (named name) as `vminit build FILE` does: the
// platform objects converted (convert.Read, as the CLI reads any file that
// is not a vminit spec), one VM taken, and the instance checked for the
// agent it renders for (the cloud-init seed or the Ignition config,
// render.Instance as build calls it). The first outcome is the file's. When
// the file holds several objects vminit reads, or one beside kinds it
// skips, an outcome follows for each object vminit reads: what
// `build --object KIND/NAME` gives.
func buildOutcomes(t *testing.T, name string, data []byte, opts platform.Options) []corpusOutcome {
	file := fileOutcome(t, name, data, opts)
	file.Key = name
	out := []corpusOutcome{file}
	docs, err := platform.Split(name, data)
	if err != nil {
		return out
	}
	keys, skipped := convert.Contents(docs)
	if len(keys) < 2 && !(len(keys) == 1 && skipped > 0) {
		return out
	}
	for _, k := range keys {
		o := opts
		o.Object = k
		one := fileOutcome(t, name, data, o)
		one.Key = name + "#" + k
		out = append(out, one)
	}
	return out
}

func fileOutcome(t *testing.T, name string, data []byte, opts platform.Options) corpusOutcome {
	rs, err := convert.Read(t.Context(), name, data, opts)
	if err != nil {
		return refusal(err)
	}
	switch len(rs) {
	case 0:
		return corpusOutcome{Verdict: "refused", Detail: "no VM in the file", Err: "no VM in the file"}
	case 1:
		return checkResult(rs[0])
	}
	d := fmt.Sprintf("%d VMs in one file (build makes one)", len(rs))
	return corpusOutcome{Verdict: "refused", Detail: d, Err: d}
}

func checkResult(r *platform.Result) corpusOutcome {
	if r.Instance == nil {
		return corpusOutcome{Verdict: "builds", Detail: "sysprep"}
	}
	tg := render.Target{NetworkConfigVersion: 2, LenientSchema: true}
	rep := render.Instance(r.Instance, tg)
	if !rep.OK() {
		return refusal(r.Locate(rep.Errors))
	}
	agent := r.Instance.Spec.Agent
	if agent == "" {
		agent = spec.AgentCloudInit
	}
	o := corpusOutcome{Verdict: "builds", Detail: agent + "/" + string(tg.DatasourceFor(r.Instance))}
	o.RoundTrip = roundTrip(r, tg, rep)
	return o
}

// roundTrip builds the spec `vminit convert --to spec` prints (r.Spec) as
// `vminit build SPEC` does, and reports how its output differs from the
// object's (rep: its check, which build writes), or "" when the bytes are
// the same: a cloud-init seed written as an ISO image, or the Ignition
// config.
func roundTrip(r *platform.Result, tg render.Target, rep *render.Result) string {
	inst, err := spec.Loader{}.Parse(r.Spec, ".")
	if err != nil {
		return "the spec does not load: " + err.Error()
	}
	back := render.Instance(inst, tg)
	if !back.OK() {
		return "the spec does not build: " + back.Errors.Error()
	}
	a, err := buildBytes(rep)
	if err != nil {
		return "the object: " + err.Error()
	}
	b, err := buildBytes(back)
	switch {
	case err != nil:
		return "the spec: " + err.Error()
	case !bytes.Equal(a, b):
		return fmt.Sprintf("building the object and its spec differ (%d and %d bytes)", len(a), len(b))
	}
	return ""
}

// buildBytes is what build writes for a checked instance.
func buildBytes(rep *render.Result) ([]byte, error) {
	if rep.Ignition != nil {
		return rep.Ignition.Config, nil
	}
	var buf bytes.Buffer
	err := media.Write(&buf, rep.Seed, media.ISO9660, media.Options{ModTime: time.Unix(1700000000, 0).UTC()})
	return buf.Bytes(), err
}

// refusal is the outcome of err: its first problem, without file and line
// (which move as the corpus is edited), as the detail.
func refusal(err error) corpusOutcome {
	o := corpusOutcome{Verdict: "refused", Err: err.Error(), Cause: err}
	if es := spec.AsErrors(err); len(es) > 0 {
		e := es[0]
		o.Detail = e.Message
		if e.Field != "" {
			o.Detail = e.Field + ": " + e.Message
		}
	} else {
		o.Detail = err.Error()
	}
	o.Detail, _, _ = strings.Cut(o.Detail, "\n")
	o.Detail = strings.ReplaceAll(o.Detail, " -- ", " - ")
	if len(o.Detail) > 100 {
		// Cut at a word, so that the line reads.
		cut := strings.LastIndexAny(o.Detail[:100], " ;,")
		if cut < 40 {
			cut = 100
			for cut > 0 && !utf8.RuneStart(o.Detail[cut]) {
				cut--
			}
		}
		o.Detail = o.Detail[:cut]
	}
	o.Detail = strings.TrimSpace(o.Detail)
	return o
}

// matches reports whether o is what l expects.
func (l corpusLine) matches(o corpusOutcome) bool {
	if l.Verdict != o.Verdict {
		return false
	}
	if l.Verdict == "builds" {
		return l.Detail == o.Detail
	}
	return strings.Contains(o.Err, l.Detail)
}

// runCorpus runs every file of p.Dir against its expect.txt line.
func runCorpus(t *testing.T, p corpusPlatform) {
	dir := filepath.Join("testdata", "corpus", p.Dir)
	expectPath := filepath.Join(dir, "expect.txt")
	raw, err := os.ReadFile(expectPath)
	if err != nil && !(*updateCorpus && os.IsNotExist(err)) {
		t.Fatal(err)
	}
	var header []string
	want := map[string]corpusLine{}
	for i, s := range strings.Split(string(raw), "\n") {
		if strings.TrimSpace(s) == "" || strings.HasPrefix(s, "#") {
			if len(want) == 0 {
				header = append(header, s)
			}
			continue
		}
		l, err := parseCorpusLine(s)
		if err != nil {
			t.Fatalf("%s:%d: %v", expectPath, i+1, err)
		}
		if _, dup := want[l.File]; dup {
			t.Fatalf("%s:%d: %s twice", expectPath, i+1, l.File)
		}
		want[l.File] = l
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || n == "expect.txt" || strings.HasSuffix(n, ".source") || (p.Ignore != nil && p.Ignore(n)) {
			continue
		}
		files = append(files, n)
	}
	sort.Strings(files)

	var got []corpusLine
	var keys []string
	counts := map[string]int{}
	seenExceptions := map[string]bool{}
	for _, n := range files {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if !hasSource(dir, n, data) {
			t.Errorf("%s: no source: a first line \"# source: github.com/OWNER/REPO/blob/COMMIT/PATH\", or a %s.source file holding it", n, n)
		}
		var outs []corpusOutcome
		if w, ok := want[n]; ok && w.Verdict == "skipped" {
			got = append(got, w)
			keys = append(keys, n)
			counts["skipped"]++
			continue
		}
		if p.Prepare != nil {
			data, err = p.Prepare(n, data)
		}
		if err != nil {
			t.Errorf("%s: %v", n, err)
			outs = []corpusOutcome{{Key: n, Verdict: "refused", Detail: "prepare: " + err.Error(), Err: "prepare: " + err.Error()}}
		} else {
			outs = buildOutcomes(t, n, data, p.Opts)
		}
		for _, o := range outs {
			keys = append(keys, o.Key)
			checkRefusalNames(t, p.Dir, o, seenExceptions)
			checkRoundTrip(t, p.Dir, o, seenExceptions)
			l := expectOutcome(t, want, o)
			if o.Key == n {
				counts[l.Verdict]++
				if c := l.category(); c != "" {
					counts[l.Verdict+", "+c]++
				}
			} else {
				counts["objects"]++
				counts["objects "+l.Verdict]++
				if c := l.category(); c != "" {
					counts["objects "+l.Verdict+", "+c]++
				}
			}
			got = append(got, l)
		}
	}
	for f := range want {
		if !slices.Contains(keys, f) && !*updateCorpus {
			t.Errorf("%s: %s names no corpus file or object", expectPath, f)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(messageExceptions)) {
		if d, _, _ := strings.Cut(k, "/"); d == p.Dir && !seenExceptions[k] {
			t.Errorf("messageExceptions[%q]: its refusal now names the object, a line and a field (or it is refused no more): remove the exception", k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(roundTripExceptions)) {
		if d, _, _ := strings.Cut(k, "/"); d == p.Dir && !seenExceptions["roundtrip:"+k] {
			t.Errorf("roundTripExceptions[%q]: its spec now builds the same bytes (or it builds no more): remove the exception", k)
		}
	}

	var sum strings.Builder
	fmt.Fprintf(&sum, "corpus %s: %d files, %d build, %d refused, %d skipped; objects in files of several kinds or objects, alone: %d, %d build, %d refused",
		p.Dir, len(files), counts["builds"], counts["refused"], counts["skipped"], counts["objects"], counts["objects builds"], counts["objects refused"])
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		if strings.Contains(k, ", ") && !strings.HasPrefix(k, "objects") {
			fmt.Fprintf(&sum, "\n\tfiles %s: %d", k, counts[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		if strings.Contains(k, ", ") && strings.HasPrefix(k, "objects") {
			fmt.Fprintf(&sum, "\n\t%s: %d", k, counts[k])
		}
	}
	t.Log(sum.String())
	checkDocCount(t, p.Dir, counts["builds"], len(files))

	if *updateCorpus {
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

// expectOutcome compares o with its line of want, reports a difference
// (unless updating), and returns the line expect.txt should have.
func expectOutcome(t *testing.T, want map[string]corpusLine, o corpusOutcome) corpusLine {
	t.Helper()
	l := corpusLine{File: o.Key, Verdict: o.Verdict, Detail: o.Detail}
	w, known := want[o.Key]
	switch {
	case !known:
		if !*updateCorpus {
			t.Errorf("%s: not in expect.txt; today it is:\n\t%s", o.Key, l)
		}
	case w.matches(o):
		l = w
	default:
		if w.Verdict == o.Verdict {
			l.Note = w.Note
		}
		if !*updateCorpus {
			t.Errorf("%s: want\n\t%s\ngot\n\t%s\nerror:\n\t%s", o.Key, w, l, strings.ReplaceAll(o.Err, "\n", "\n\t"))
		}
	}
	if l.Verdict == "refused" && l.Note == "" && *updateCorpus {
		l.Note = "gap: TODO"
	}
	if l.Verdict == "refused" {
		if l.category() == "" || strings.Contains(l.Note, "TODO") {
			t.Errorf("%s: a refusal needs a category: -- upstream-invalid: WHY, -- by-design: WHY or -- gap: WHAT (have %q)", o.Key, l.Note)
		}
	}
	return l
}

// hasSource reports whether the corpus file n names its source.
func hasSource(dir, n string, data []byte) bool {
	if strings.HasPrefix(string(data), "# source: github.com/") {
		return true
	}
	s, err := os.ReadFile(filepath.Join(dir, n+".source"))
	return err == nil && strings.HasPrefix(string(s), "# source: github.com/")
}

// messageExceptions are the refusals, DIR/KEY, whose message does not yet
// name the object, a line and a field (checkRefusalNames), each with why
// ("gap: WHAT"). An exception whose message passes is an error:
// the list only shrinks.
var messageExceptions = map[string]string{}

// documentProblems start the messages of problems with a whole document
// (it does not parse), which name no field.
var documentProblems = []string{"not valid YAML", "not well-formed XML", "a second root element", "not JSON"}

// checkRefusalNames checks that every problem of a refusal names the
// object (KIND/NAME, as --object picks it), a line and, unless the whole
// document is at fault, a field path. A refusal of the
// whole file (several VMs: the CLI's usage error lists them) or of the
// test's own preparation is none of an object's.
func checkRefusalNames(t *testing.T, dir string, o corpusOutcome, seen map[string]bool) {
	t.Helper()
	if o.Verdict != "refused" || o.Cause == nil || strings.HasPrefix(o.Detail, "prepare: ") {
		return
	}
	var short []string
	es := spec.AsErrors(o.Cause)
	if es == nil {
		short = append(short, fmt.Sprintf("%q: not a field error (no object, line or field)", o.Err))
	}
	for _, e := range es {
		var miss []string
		if e.Object == "" {
			miss = append(miss, "the object")
		}
		if e.Line == 0 {
			miss = append(miss, "a line")
		}
		if e.Field == "" && !slices.ContainsFunc(documentProblems, func(p string) bool { return strings.HasPrefix(e.Message, p) }) {
			miss = append(miss, "a field")
		}
		if len(miss) > 0 {
			short = append(short, fmt.Sprintf("%q names no %s", e.Error(), strings.Join(miss, ", no ")))
		}
	}
	key := dir + "/" + o.Key
	if why, ok := messageExceptions[key]; ok {
		if len(short) == 0 {
			return // not seen: runCorpus reports the exception as stale
		}
		seen[key] = true
		if !strings.HasPrefix(why, "gap: ") {
			t.Errorf("messageExceptions[%q]: want a reason starting \"gap: \", have %q", key, why)
		}
		return
	}
	for _, s := range short {
		t.Errorf("%s: a refusal must name the object, a line and a field: %s", o.Key, s)
	}
}

// docCountRE is the sentence of docs/platforms/PLATFORM.md's Corpus
// section that states how many of the corpus files build: "**N of the M
// files build**".
var docCountRE = regexp.MustCompile(`\*\*(\d+) of the (\d+) files build\*\*`)

// checkDocCount compares the count docs/platforms/DIR.md states with the
// corpus's (or, with -update-corpus, writes it), so that it never goes
// stale.
func checkDocCount(t *testing.T, dir string, builds, files int) {
	t.Helper()
	path := filepath.Join("..", "docs", "platforms", dir+".md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ms := docCountRE.FindAllSubmatchIndex(doc, -1)
	if len(ms) != 1 {
		t.Errorf("%s: want one sentence stating \"**N of the M files build**\" in its Corpus section, found %d", path, len(ms))
		return
	}
	m := ms[0]
	want := fmt.Sprintf("**%d of the %d files build**", builds, files)
	if got := string(doc[m[0]:m[1]]); got != want {
		if !*updateCorpus {
			t.Errorf("%s says %s; the corpus: %s (go test ./platform -run Corpus -update-corpus rewrites it)", path, got, want)
			return
		}
		out := append(append(append([]byte{}, doc[:m[0]]...), want...), doc[m[1]:]...)
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// roundTripExceptions are the objects, DIR/KEY, whose spec (`convert --to
// spec`) does not build the object's bytes, each with why
// ("gap: WHAT"). An exception that passes is an error: the list only shrinks.
var roundTripExceptions = map[string]string{}

// checkRoundTrip checks that the spec `vminit convert --to spec` prints for
// an object that builds, built, gives the same bytes as the object: "convert --to spec, then build"
// must never change what a guest gets.
func checkRoundTrip(t *testing.T, dir string, o corpusOutcome, seen map[string]bool) {
	t.Helper()
	if o.RoundTrip == "" {
		return
	}
	key := dir + "/" + o.Key
	if why, ok := roundTripExceptions[key]; ok {
		seen["roundtrip:"+key] = true
		if !strings.HasPrefix(why, "gap: ") {
			t.Errorf("roundTripExceptions[%q]: want a reason starting \"gap: \", have %q", key, why)
		}
		return
	}
	t.Errorf("%s: convert --to spec, then build: %s", o.Key, o.RoundTrip)
}
