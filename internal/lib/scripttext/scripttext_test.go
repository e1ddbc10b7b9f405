package scripttext

import "testing"

func TestServed(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"#!/bin/x\n# what\n\n# why\nx = 1  # kept\n  # gone\ny = '#'\n", "#!/bin/x\n# what\n\nx = 1  # kept\ny = '#'\n"},
		{"#!/bin/sh\n# what\nset -u\n\t# gone\necho \"#\"\n", "#!/bin/sh\n# what\nset -u\necho \"#\"\n"},
		{"x = 1\n# gone", "x = 1\n"},
		{"", ""},
	} {
		if got := string(Served([]byte(c.in))); got != c.want {
			t.Errorf("Served(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
