// Package termtext makes text that others wrote (a guest's stage names
// and failure messages) safe to show to a person: on a terminal, in a
// table, in a Kubernetes Event or condition that `kubectl describe`
// prints. Line is the one rule: every place where such text leaves vminit
// for a reader goes through it.
package termtext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Line is s on one line, with nothing a terminal would act on:
//
//   - escape sequences are removed whole: CSI (ESC [ … final byte, or
//     U+009B …), OSC, DCS, SOS, PM and APC strings up to their BEL or ST
//     (ESC ] 0;title BEL sets a window's title, ESC ] 52;… writes the
//     clipboard), and ESC with intermediate bytes and a final one
//     (ESC ( B, ESC c); a string sequence with no end removes the rest;
//   - other C0 and C1 control characters and DEL are removed;
//   - runs of white space (new lines, tabs) are one space, and the ends
//     trimmed;
//   - what is still not printable (invalid UTF-8, format characters such
//     as a right-to-left override) is U+FFFD.
func Line(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if n == 1 && r == utf8.RuneError { // invalid UTF-8
			i++
			emit(&b, &space, utf8.RuneError)
			continue
		}
		switch {
		case r == 0x1b:
			i = skipEscape(s, i+n)
			continue
		case r >= 0x80 && r <= 0x9f: // C1: some introduce a sequence
			i = skipC1(s, r, i+n)
			continue
		case unicode.IsSpace(r):
			space = true
		case r < 0x20 || r == 0x7f:
			// another control character: removed
		case !unicode.IsPrint(r):
			emit(&b, &space, utf8.RuneError)
		default:
			emit(&b, &space, r)
		}
		i += n
	}
	return b.String()
}

// emit writes r, after the one space a run of white space before it
// became (none at the start).
func emit(b *strings.Builder, space *bool, r rune) {
	if *space && b.Len() > 0 {
		b.WriteByte(' ')
	}
	*space = false
	b.WriteRune(r)
}

// skipEscape returns where the sequence whose ESC ends before i ends.
func skipEscape(s string, i int) int {
	if i >= len(s) {
		return i
	}
	switch c := s[i]; {
	case c == '[':
		return skipCSI(s, i+1)
	case c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_':
		return skipString(s, i+1)
	case c >= 0x20 && c <= 0x2f: // intermediate bytes, then a final one
		for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
			i++
		}
		if i < len(s) && s[i] >= 0x30 && s[i] <= 0x7e {
			i++
		}
		return i
	case c >= 0x30 && c <= 0x7e: // a two-byte sequence (ESC c, ESC 7)
		return i + 1
	}
	return i // a lone ESC: removed, what follows kept
}

// skipC1 returns where the sequence that C1 control r (ending before i)
// introduces ends: CSI and the string controls as their ESC forms.
func skipC1(s string, r rune, i int) int {
	switch r {
	case 0x9b: // CSI
		return skipCSI(s, i)
	case 0x90, 0x98, 0x9d, 0x9e, 0x9f: // DCS, SOS, OSC, PM, APC
		return skipString(s, i)
	}
	return i
}

// skipCSI skips a control sequence's parameter and intermediate bytes
// and its final byte.
func skipCSI(s string, i int) int {
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x3f {
		i++
	}
	if i < len(s) && s[i] >= 0x40 && s[i] <= 0x7e {
		i++
	}
	return i
}

// skipString skips a control string up to and with its terminator: BEL,
// ESC \ or U+009C; without one, to the end.
func skipString(s string, i int) int {
	for i < len(s) {
		switch {
		case s[i] == 0x07:
			return i + 1
		case s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\':
			return i + 2
		case strings.HasPrefix(s[i:], "\u009c"):
			return i + len("\u009c")
		}
		i++
	}
	return i
}
