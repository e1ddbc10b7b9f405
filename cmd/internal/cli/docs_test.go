package cli

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/cmd/internal/servekit"
	"github.com/vminit/vminit/internal/testing/testtools"
)

// repoRoot is the repository, seen from this package's directory.
const repoRoot = "../../.."

// TestDocsCommands runs every vminit command that README.md and docs/*.md
// show in a shell block, in order, in a copy of the repository (as a
// reader runs them from the root of a clone), so that the documentation,
// the example files and the flags cannot drift apart. The commands of
// notRun and serveNotRun, and lines that pipe or write outside the copy,
// are parsed only (their command and every flag must exist), for the
// reasons those give. A command is expected to succeed unless its line
// ends with "# exits N". A serve line that can run here keeps running
// while the curl lines after it run against it (the try-its: see
// runCurlLine).
func TestDocsCommands(t *testing.T) {
	pages, _ := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	sub, _ := filepath.Glob(filepath.Join(repoRoot, "docs", "*", "*.md"))
	pages = append(append([]string{filepath.Join(repoRoot, "README.md")}, pages...), sub...)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range pages {
		t.Run(filepath.Base(page), func(t *testing.T) {
			lines := shellLines(t, page)
			if len(lines) == 0 {
				return
			}
			dir := docsFixture(t)
			if err := os.Chdir(dir); err != nil {
				t.Fatal(err)
			}
			defer os.Chdir(wd)
			var srv *docServer
			for _, l := range lines {
				if strings.HasPrefix(l.text, "curl ") {
					runCurlLine(t, l, srv)
					continue
				}
				srv.stop(t)
				srv = runDocLine(t, l)
			}
			srv.stop(t)
		})
	}
}

// docLine is one command of a shell block.
type docLine struct {
	text     string
	line     int
	wantExit int
	comment  string // after " #"
}

var exitsComment = regexp.MustCompile(`#\s*exits (\d)`)

// shellLines returns the vminit commands of a page's ```sh blocks, with
// continuation lines joined.
func shellLines(t *testing.T, page string) []docLine {
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []docLine
	in := false
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "```sh"):
			in = true
			continue
		case strings.HasPrefix(l, "```"):
			in = false
			continue
		case !in:
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if s, ok := strings.CutSuffix(l, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(l)
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		want := 0
		if m := exitsComment.FindStringSubmatch(text); m != nil {
			want, _ = strconv.Atoi(m[1])
		}
		comment := ""
		if i := strings.Index(text, " #"); i >= 0 {
			text, comment = strings.TrimSpace(text[:i]), strings.TrimSpace(text[i+2:])
		}
		text = strings.Replace(text, "go run ./cmd/vminit ", "vminit ", 1)
		if strings.HasPrefix(text, "vminit ") || strings.Contains(text, "| vminit ") || strings.HasPrefix(text, "curl ") {
			out = append(out, docLine{text: text, line: start, wantExit: want, comment: comment})
		}
	}
	return out
}

// docsFixture is a copy of the repository (its files, without .git): the
// pages' commands run as a reader runs them from the root of a clone,
// with its files and its directories (an output named seed/ meets the
// seed package there).
func docsFixture(t *testing.T) string {
	dir := t.TempDir()
	copyTree(t, repoRoot, dir)
	return dir
}

func copyTree(t *testing.T, from, to string) {
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// notRun are the commands the test parses (the command and every flag
// must exist) but does not run, and why. A serve line runs when it can
// here (runServeLine); lines that pipe or write outside the directory are
// parsed only too.
var notRun = map[string]string{
	"run":       "boots a downloaded cloud image under QEMU, for minutes",
	"instances": "needs a server's admin API or a cluster (TestInstances and TestInstancesKubeconfig run them)",
}

// serveNotRun says why a serve line cannot run here, or "" when it can:
// it listens on loopback only and reads a spec directory of the copy.
func serveNotRun(args []string) string {
	for i, a := range args {
		switch {
		case a == "..." || a == "--kubernetes" || strings.HasPrefix(a, "--etcd-"):
			return "needs a cluster or etcd, or elides flags"
		case filepath.IsAbs(a):
			return "reads files of an installed host (" + a + ")"
		case strings.HasSuffix(a, "listen") && i+1 < len(args) && !servekit.IsLoopback(args[i+1]):
			return "listens on " + args[i+1] + ", an address only root (and an added address) can have"
		}
	}
	return ""
}

// adminAddressed reports whether an instances line says where its
// instances are: a cluster, or an admin server and its token.
func adminAddressed(args []string) bool {
	has := func(flag string) bool {
		return slices.ContainsFunc(args, func(a string) bool { return a == flag || strings.HasPrefix(a, flag+"=") })
	}
	return has("--kubeconfig") || has("--server") && has("--token-file")
}

// docServer is a serve line running while the curl lines after it run.
type docServer struct {
	line   docLine
	cancel context.CancelFunc
	done   chan error
	stderr *testtools.SyncBuffer
	// addrs maps each address the line names (127.0.0.1:8080) to the
	// one it listens on: a port the line names may be taken on the
	// machine running the tests, so the ports become 0.
	addrs map[string]string
}

// listeningLine is serve's log line for each listener, with --log-format
// text.
var listeningLine = regexp.MustCompile(`msg=listening listener=(\w+) address=(\S+)`)

// startServeLine starts a serve line and waits until every listener it
// names listens; nil if it stopped first (the test has failed).
func startServeLine(t *testing.T, l docLine, args []string) *docServer {
	t.Helper()
	args = slices.Clone(args)
	var named [][2]string // listener, address the line gives
	for i := range args {
		if strings.HasSuffix(args[i], "listen") && i+1 < len(args) {
			name := map[string]string{"--listen": "metadata", "--metrics-listen": "metrics", "--admin-listen": "admin"}[args[i]]
			named = append(named, [2]string{name, args[i+1]})
			host, _, _ := net.SplitHostPort(args[i+1])
			args[i+1] = net.JoinHostPort(host, "0")
		}
	}
	if !slices.ContainsFunc(named, func(n [2]string) bool { return n[0] == "metadata" }) {
		named = append(named, [2]string{"metadata", ""})
	}
	ctx, cancel := context.WithCancel(context.Background())
	root := NewRootCommand()
	s := &docServer{line: l, cancel: cancel, done: make(chan error, 1), stderr: &testtools.SyncBuffer{}, addrs: map[string]string{}}
	root.SetErr(s.stderr)
	root.SetArgs(append(args, "--log-format", "text"))
	go func() { s.done <- root.ExecuteContext(ctx) }()
	for len(listeningLine.FindAllString(s.stderr.String(), -1)) < len(named) {
		select {
		case err := <-s.done:
			cancel()
			t.Errorf("line %d: %s: stopped before listening: %v\n%s", l.line, l.text, err, s.stderr)
			return nil
		case <-time.After(10 * time.Millisecond):
		}
	}
	seen := map[string]int{}
	for _, m := range listeningLine.FindAllStringSubmatch(s.stderr.String(), -1) {
		k := 0
		for _, n := range named {
			if n[0] == m[1] {
				if k == seen[m[1]] {
					s.addrs[n[1]] = m[2]
				}
				k++
			}
		}
		seen[m[1]]++
	}
	return s
}

// stop stops a running serve line (nil: none), failing the test if it
// ended with an error.
func (s *docServer) stop(t *testing.T) {
	t.Helper()
	if s == nil {
		return
	}
	s.cancel()
	if err := <-s.done; err != nil {
		t.Errorf("line %d: %s: %v\n%s", s.line.line, s.line.text, err, s.stderr)
	}
}

// runCurlLine fetches a curl line's loopback URL (others download from
// the network, and are not run) from the serve line running before it, from --interface's address when it gives one, as the page's
// reader does in another terminal. The answer must be 200 with a body,
// or the status its comment starts with ("# 404: why") with a body that
// says the why.
func runCurlLine(t *testing.T, l docLine, srv *docServer) {
	t.Helper()
	words, ok := shellWords(l.text)
	if !ok {
		t.Errorf("line %d: cannot split %q", l.line, l.text)
		return
	}
	if !slices.ContainsFunc(words, func(w string) bool { return strings.HasPrefix(w, "http://127.") }) {
		return // a download from the network (a guest image): not a try of serve
	}
	if srv == nil {
		t.Errorf("line %d: %s: no serve line runs before it", l.line, l.text)
		return
	}
	var rawURL, iface string
	for i := 1; i < len(words); i++ {
		switch w := words[i]; {
		case w == "--interface" && i+1 < len(words):
			iface = words[i+1]
			i++
		case strings.HasPrefix(w, "http://"):
			rawURL = w
		default:
			t.Errorf("line %d: %s: the test does not know curl's %q", l.line, l.text, w)
		}
	}
	u, err := url.Parse(rawURL)
	if err != nil || srv.addrs[u.Host] == "" {
		t.Errorf("line %d: %s: the URL names no address the serve line listens on (%v)", l.line, l.text, srv.addrs)
		return
	}
	u.Host = srv.addrs[u.Host]
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	if iface != "" {
		dialer.LocalAddr = &net.TCPAddr{IP: net.ParseIP(iface)}
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext}}
	res, err := client.Get(u.String())
	if err != nil {
		t.Errorf("line %d: %s: %v", l.line, l.text, err)
		return
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	want, why := 200, ""
	if code, rest, ok := strings.Cut(l.comment, ": "); ok {
		if n, err := strconv.Atoi(code); err == nil {
			want, why = n, rest
		}
	}
	if res.StatusCode != want || len(body) == 0 || !strings.Contains(string(body), why) {
		t.Errorf("line %d: %s: %d %q, want %d saying %q\n%s", l.line, l.text, res.StatusCode, body, want, why, srv.stderr)
	}
}

// runDocLine runs a line; a serve line that can run here is left
// running for the curl lines after it (the caller stops it).
func runDocLine(t *testing.T, l docLine) *docServer {
	t.Helper()
	text := l.text
	var stdin, stdout string
	piped := false
	if i := strings.Index(text, "| vminit "); i >= 0 {
		text, piped = text[i+2:], true
	}
	if i := strings.Index(text, " | "); i >= 0 {
		text, piped = text[:i], true
	}
	words, ok := shellWords(text)
	if !ok {
		t.Errorf("line %d: cannot split %q", l.line, l.text)
		return nil
	}
	var args []string
	for i := 1; i < len(words); i++ {
		switch w := words[i]; {
		case (w == "<" || w == ">" || w == ">>") && i+1 < len(words):
			if w == "<" {
				stdin = words[i+1]
			} else {
				stdout = words[i+1]
			}
			i++
		default:
			args = append(args, w)
		}
	}
	outside := filepath.IsAbs(stdout) || filepath.IsAbs(stdin)
	if len(args) > 0 && args[0] == "serve" && !piped && !outside && serveNotRun(args) == "" {
		return startServeLine(t, l, args)
	}
	if len(args) > 0 && args[0] == "instances" && !adminAddressed(args) {
		t.Errorf("line %d: %s: names neither --kubeconfig nor --server and --token-file: a reader's shell has no server", l.line, l.text)
	}
	if len(args) == 0 || notRun[args[0]] != "" || args[0] == "serve" || piped || outside {
		root := NewRootCommand()
		root.InitDefaultCompletionCmd()
		cmd, rest, err := root.Find(args)
		if err == nil {
			err = cmd.ParseFlags(rest)
		}
		if err != nil {
			t.Errorf("line %d: %s: %v", l.line, l.text, err)
		}
		return nil
	}
	var in io.Reader = strings.NewReader("")
	if stdin != "" {
		f, err := os.Open(stdin)
		if err != nil {
			t.Fatalf("line %d: %v", l.line, err)
		}
		defer f.Close()
		in = f
	}
	var out, errb bytes.Buffer
	code := execute(args, in, &out, &errb)
	if code != l.wantExit {
		t.Errorf("line %d: %s: exit %d, want %d\n%s%s", l.line, l.text, code, l.wantExit, out.String(), errb.String())
	}
	if stdout != "" {
		os.WriteFile(stdout, out.Bytes(), 0o600)
	}
	return nil
}

// shellWords splits a command line as a shell would, for the quoting the
// pages use: single and double quotes and backslash escapes. It reports
// false for what it does not handle ($(…), backquotes).
func shellWords(s string) ([]string, bool) {
	if strings.Contains(s, "$(") || strings.Contains(s, "`") {
		return nil, false
	}
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				return nil, false
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '\\' && i+1 < len(s):
			cur.WriteByte(s[i+1])
			i++
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, true
}

// TestMakeDefault: `make` alone, as a reader types it in a clone, builds
// the programs into bin/ and does nothing else; the test tools' install
// (apt, with sudo) and the tests stay behind the explicit `make test`
// (make alone once ran make test).
func TestMakeDefault(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	out, err := exec.Command("make", "-n", "-C", repoRoot).CombinedOutput()
	if err != nil {
		t.Fatalf("make -n: %v\n%s", err, out)
	}
	got := strings.TrimSpace(string(out))
	if !strings.Contains(got, "go build") || !strings.Contains(got, "-o bin/ ./cmd/vminit...") {
		t.Errorf("make does not build ./cmd/vminit... into bin/:\n%s", got)
	}
	for _, bad := range []string{"install-test-tools", "go test", "apt", "sudo"} {
		if strings.Contains(got, bad) {
			t.Errorf("make alone runs %q:\n%s", bad, got)
		}
	}
}
