package platform_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vminit/vminit/platform"
)

// TestCorpusCAPI runs the Cluster API corpus: the clusterctl templates,
// examples and e2e data of cluster-api (CAPD) and its providers (CAPO,
// CAPV, CAPK), kept as published; their variables are substituted from
// testdata/corpus/capi/vars.env as clusterctl generate does.
func TestCorpusCAPI(t *testing.T) {
	vars, err := readVarsEnv(filepath.Join("testdata", "corpus", "capi", "vars.env"))
	if err != nil {
		t.Fatal(err)
	}
	runCorpus(t, corpusPlatform{
		Dir:     "capi",
		Opts:    capiCorpusOpts,
		Prepare: func(_ string, data []byte) ([]byte, error) { return clusterctlSubst(data, vars) },
		Ignore:  func(n string) bool { return n == "vars.env" },
	})
}

// capiCorpusOpts are what CABPK takes from the Cluster for a joining
// machine's discovery, which the CLI's messages ask for
// (--bootstrap-token, --control-plane-endpoint, --ca-cert-hash).
var capiCorpusOpts = platform.Options{BootstrapToken: "abcdef.0123456789abcdef", ControlPlaneEndpoint: "192.0.2.10:6443",
	CACertHashes: []string{"sha256:" + strings.Repeat("0f", 32)}}

// readVarsEnv reads NAME=VALUE lines (# comments); the value is the rest of
// the line, as written.
func readVarsEnv(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	vars := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		l := sc.Text()
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return nil, fmt.Errorf("%s: %q: want NAME=VALUE", path, l)
		}
		vars[k] = v
	}
	return vars, sc.Err()
}

// clusterctlSubst substitutes data's variables as clusterctl generate does
// (its yamlprocessor.SimpleProcessor, with drone/envsubst): "$$" is a
// literal "$"; ${NAME} is the variable's value; ${NAME:=D} and ${NAME:-D}
// are D when the variable is unset or empty, ${NAME=D} and ${NAME-D} when
// it is unset; a bare $NAME is text. A variable with neither value nor
// default is an error naming every such variable, as clusterctl's.
func clusterctlSubst(data []byte, vars map[string]string) ([]byte, error) {
	s := legacyVar.ReplaceAllStringFunc(string(data), func(v string) string { return strings.Join(strings.Fields(v), "") })
	var out strings.Builder
	var missing []string
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$$"):
			out.WriteByte('$')
			i += 2
			continue
		case !strings.HasPrefix(s[i:], "${"):
			out.WriteByte(s[i])
			i++
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return nil, fmt.Errorf("offset %d: missing closing brace", i)
		}
		expr := s[i+2 : i+end]
		i += end + 1
		name, op, arg := expr, "", ""
		if j := strings.IndexAny(expr, ":=-%#"); j >= 0 {
			name = expr[:j]
			rest := expr[j:]
			for _, o := range []string{":=", ":-", "=", "-", "%%", "%", "##", "#"} {
				if strings.HasPrefix(rest, o) {
					op, arg = o, rest[len(o):]
					break
				}
			}
			if op == "" {
				return nil, fmt.Errorf("${%s}: a substitution clusterctl's templates do not use", expr)
			}
		}
		v, set := vars[name]
		switch {
		case !set && (op == "" || op[0] == '%' || op[0] == '#'):
			if !slices.Contains(missing, name) {
				missing = append(missing, name)
			}
		case (op == ":=" || op == ":-") && v == "", (op == "=" || op == "-") && !set:
			v = arg
		case op != "" && (op[0] == '%' || op[0] == '#'):
			v = trimGlob(v, op, arg)
		}
		out.WriteString(v)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("value for variables [%s] is not set; add them to vars.env", strings.Join(missing, ", "))
	}
	return []byte(out.String()), nil
}

// legacyVar matches "${ NAME }" with blanks, which clusterctl reads as
// ${NAME} (convertLegacyVars).
var legacyVar = regexp.MustCompile(`\$\{(\s+[A-Za-z0-9_$]+\s*|\s*[A-Za-z0-9_$]+\s+)\}`)

// trimGlob is the shell's ${v%pat} (shortest suffix), ${v%%pat} (longest),
// ${v#pat} and ${v##pat} (prefixes), with path.Match patterns.
func trimGlob(v, op, pat string) string {
	n := len(v)
	match := func(s string) bool { ok, _ := path.Match(pat, s); return ok }
	switch op {
	case "%":
		for k := n; k >= 0; k-- {
			if match(v[k:]) {
				return v[:k]
			}
		}
	case "%%":
		for k := 0; k <= n; k++ {
			if match(v[k:]) {
				return v[:k]
			}
		}
	case "#":
		for k := 0; k <= n; k++ {
			if match(v[:k]) {
				return v[k:]
			}
		}
	case "##":
		for k := n; k >= 0; k-- {
			if match(v[:k]) {
				return v[k:]
			}
		}
	}
	return v
}

func TestClusterctlSubst(t *testing.T) {
	vars := map[string]string{"A": "a", "E": "", "K": "v1.31.2"}
	for _, c := range []struct{ in, want string }{
		{"x ${A} y", "x a y"},
		{"${E:=d} ${E=d} ${U=d} ${U:-d} ${A:=d}", "d  d d a"},
		{"echo $${HOST} $$ $script", "echo ${HOST} $ $script"},
		{`${V:=""}`, `""`},
		{"${ A } ${A }", "a a"},
		{"k-${K%.*} ${K#v} ${K%%.*}", "k-v1.31 1.31.2 v1"},
	} {
		got, err := clusterctlSubst([]byte(c.in), vars)
		if err != nil || string(got) != c.want {
			t.Errorf("%q = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := clusterctlSubst([]byte("${U} ${W}"), vars); err == nil || !strings.Contains(err.Error(), "[U, W]") {
		t.Errorf("missing variables: %v", err)
	}
}
