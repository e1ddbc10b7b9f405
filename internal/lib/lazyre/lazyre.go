// Package lazyre is a regular expression compiled on first use rather
// than at init, for the package-level patterns of packages every vminit
// run links: compiled at init, each costs every run, including the many
// that never match it (docs/benchmarks.md, "Whole process"). The standard
// library keeps the same idea in internal/lazyregexp, which other modules
// cannot import; this one has the methods vminit calls.
package lazyre

import (
	"regexp"
	"sync"
)

// Regexp is a pattern compiled, as regexp.MustCompile compiles it, the
// first time one of its methods is called.
type Regexp struct {
	expr     string
	once     sync.Once
	compiled *regexp.Regexp
}

// New returns the Regexp of expr. An invalid expr panics on first use,
// which every test that reaches the pattern shows.
func New(expr string) *Regexp {
	return &Regexp{expr: expr}
}

func (r *Regexp) re() *regexp.Regexp {
	r.once.Do(func() { r.compiled = regexp.MustCompile(r.expr) })
	return r.compiled
}

// Regexp is the compiled pattern.
func (r *Regexp) Regexp() *regexp.Regexp { return r.re() }

// String is the source text of the pattern.
func (r *Regexp) String() string { return r.expr }

// MatchString is regexp.Regexp.MatchString.
func (r *Regexp) MatchString(s string) bool { return r.re().MatchString(s) }

// FindStringSubmatch is regexp.Regexp.FindStringSubmatch.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.re().FindStringSubmatch(s) }

// FindSubmatch is regexp.Regexp.FindSubmatch.
func (r *Regexp) FindSubmatch(b []byte) [][]byte { return r.re().FindSubmatch(b) }

// FindAllSubmatchIndex is regexp.Regexp.FindAllSubmatchIndex.
func (r *Regexp) FindAllSubmatchIndex(b []byte, n int) [][]int {
	return r.re().FindAllSubmatchIndex(b, n)
}

// ReplaceAllString is regexp.Regexp.ReplaceAllString.
func (r *Regexp) ReplaceAllString(src, repl string) string { return r.re().ReplaceAllString(src, repl) }

// FindAllStringSubmatch is regexp.Regexp.FindAllStringSubmatch.
func (r *Regexp) FindAllStringSubmatch(s string, n int) [][]string {
	return r.re().FindAllStringSubmatch(s, n)
}

// FindStringIndex is regexp.Regexp.FindStringIndex.
func (r *Regexp) FindStringIndex(s string) []int { return r.re().FindStringIndex(s) }

// FindAllString is regexp.Regexp.FindAllString.
func (r *Regexp) FindAllString(s string, n int) []string { return r.re().FindAllString(s, n) }

// Match is regexp.Regexp.Match.
func (r *Regexp) Match(b []byte) bool { return r.re().Match(b) }
