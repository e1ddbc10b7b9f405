package termtext_test

import (
	"strings"
	"testing"
	"unicode"

	"github.com/vminit/vminit/internal/lib/termtext"
)

func TestLine(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain text", "plain text"},
		{"  two\n\tlines \r\n", "two lines"},
		{"\x1b]0;owned\x07title", "title"},                   // OSC window title, BEL
		{"\x1b]52;c;ZWNobyBoaQ==\x1b\\after", "after"},       // OSC 52 clipboard, ST
		{"\u009d52;c;ZWNobw==\u009cafter", "after"},          // the same with C1 controls
		{"\x1b[2J\x1b[1;31mred\x1b[0m", "red"},               // CSI
		{"\u009b2Jcleared", "cleared"},                       // 8-bit CSI
		{"a\x1b(Bb\x1bc", "ab"},                              // designate a charset; reset
		{"\x1bPq#0;2;0;0;0\x1b\\sixel", "sixel"},             // DCS
		{"cut \x1b]0;never ends", "cut"},                     // an unterminated string
		{"bell\x07 and \x00nul\x7f", "bell and nul"},         // other controls
		{"caf\xe9 \u202egnp.exe", "caf\ufffd \ufffdgnp.exe"}, // invalid UTF-8, a bidi override
		{"\u0085next\u00a0line", "next line"},                // NEL and NBSP are white space
		{"trailing\x1b", "trailing"},
	} {
		if got := termtext.Line(c.in); got != c.want {
			t.Errorf("Line(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// FuzzLine: whatever the input, the output is one line of printable
// characters and plain spaces, no longer than the input allows.
func FuzzLine(f *testing.F) {
	for _, s := range []string{"\x1b]0;x\x07", "\x1b[31m", "a\nb", "\u009b1m", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := termtext.Line(s)
		for _, r := range got {
			if r != ' ' && !unicode.IsPrint(r) && r != '\ufffd' {
				t.Fatalf("Line(%q) = %q holds %U", s, got, r)
			}
		}
		if strings.HasPrefix(got, " ") || strings.HasSuffix(got, " ") || strings.Contains(got, "  ") {
			t.Fatalf("Line(%q) = %q: spaces not folded", s, got)
		}
		if len(got) > 3*len(s) {
			t.Fatalf("Line(%q) = %q grew", s, got)
		}
	})
}
