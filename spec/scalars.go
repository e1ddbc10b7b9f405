package spec

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Mode is a file's permission bits. In a spec it is always written in octal,
// as a string ("0644") or a YAML number (0644, 0o644, 644): a bare 420 means
// 0420, never decimal 420, because a mode that silently changes meaning with
// its quoting is worse than one rule.
//
// In an Instance object (the Kubernetes API) a mode must be a quoted
// string: kubectl reads YAML 1.1, in which an unquoted 0644 is the number
// 420, which this rule would take for 0420.
//
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:Pattern=`^(0[oO])?[0-7]{1,5}$`
type Mode uint32

// ParseMode parses an octal mode such as "0644", "644" or "0o755".
func ParseMode(s string) (Mode, error) {
	t := strings.TrimPrefix(strings.TrimPrefix(s, "0o"), "0O")
	if t == "" || len(t) > 5 {
		return 0, fmt.Errorf("mode %q: want octal digits such as \"0644\"", s)
	}
	v, err := strconv.ParseUint(t, 8, 32)
	if err != nil || v > 07777 {
		return 0, fmt.Errorf("mode %q: want octal digits such as \"0644\" (at most 07777)", s)
	}
	return Mode(v), nil
}

// String formats the mode as four octal digits.
func (m Mode) String() string { return fmt.Sprintf("%04o", uint32(m)) }

// UnmarshalYAML reads the node's literal text, so 0644 and "0644" agree.
func (m *Mode) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return typeErr(n, "want an octal mode such as \"0644\"")
	}
	v, err := ParseMode(n.Value)
	if err != nil {
		return typeErr(n, err.Error())
	}
	*m = v
	return nil
}

// MarshalYAML writes the mode as a quoted octal string.
func (m Mode) MarshalYAML() (any, error) { return m.String(), nil }

// MarshalJSON writes the mode as an octal string.
func (m Mode) MarshalJSON() ([]byte, error) { return json.Marshal(m.String()) }

// UnmarshalJSON reads an octal string, or a number's literal digits as
// octal, by the same rule as UnmarshalYAML.
func (m *Mode) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	v, err := ParseMode(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Command is a first-boot command: either an argument vector run without a
// shell, or a string run by /bin/sh -c.
type Command struct {
	Argv  []string
	Shell string
}

// UnmarshalYAML accepts a string (shell) or a list of strings (argv).
func (c *Command) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		c.Shell = n.Value
		return nil
	case yaml.SequenceNode:
		return n.Decode(&c.Argv)
	}
	return typeErr(n, "want a shell string or a list of arguments")
}

// typeErr reports a bad value as a *yaml.TypeError, which the decoder
// collects and keeps going, so one bad field does not hide the others.
func typeErr(n *yaml.Node, msg string) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", n.Line, msg)}}
}

// MarshalYAML writes the command back in the form it was given.
func (c Command) MarshalYAML() (any, error) {
	if c.Argv != nil {
		return c.Argv, nil
	}
	return c.Shell, nil
}

// MarshalJSON writes the command back in the form it was given.
func (c Command) MarshalJSON() ([]byte, error) {
	if c.Argv != nil {
		return json.Marshal(c.Argv)
	}
	return json.Marshal(c.Shell)
}

// UnmarshalJSON accepts a string (shell) or a list of strings (argv).
func (c *Command) UnmarshalJSON(b []byte) error {
	*c = Command{}
	if len(b) > 0 && b[0] == '[' {
		if err := json.Unmarshal(b, &c.Argv); err != nil {
			return err
		}
		if c.Argv == nil { // "[]" must stay an (empty) argv
			c.Argv = []string{}
		}
		return nil
	}
	return json.Unmarshal(b, &c.Shell)
}

// ShellLine returns the command as one /bin/sh line, quoting argv elements.
func (c Command) ShellLine() string {
	if c.Argv == nil {
		return c.Shell
	}
	q := make([]string, len(c.Argv))
	for i, a := range c.Argv {
		q[i] = ShellQuote(a)
	}
	return strings.Join(q, " ")
}

// ShellQuote quotes s for a POSIX shell, leaving plainly safe words alone.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@%+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
