package spec

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is matched (errors.Is) by every error that reports a problem
// with a spec's content, as opposed to an I/O failure.
var ErrInvalid = errors.New("invalid instance spec")

// FieldError is one problem with one field.
type FieldError struct {
	// File is the spec file's name, when the spec came from a file.
	File string `json:"file,omitempty"`
	// Line is the 1-based line of the field in the file, 0 when unknown.
	Line int `json:"line,omitempty"`
	// Field is the field's path, e.g. spec.users[0].sshAuthorizedKeys[1].
	Field string `json:"field"`
	// Message says what is wrong and, where it can, what to do.
	Message string `json:"message"`
	// Object names the platform object the field is in, as --object
	// picks it (KIND/NAME: "Pod/cirros-vm"), when the problem is in a
	// platform's object rather than a spec: a file may hold several.
	Object string `json:"object,omitempty"`
	// Cause is the error behind the problem, when there is one worth
	// matching with errors.Is (a missing referenced object, say).
	Cause error `json:"-"`
	// TextLine is, for a problem inside the text a field holds (a raw
	// network or user-data config), its 1-based line in that text
	// (TextLine); 0 when it is the whole field. A platform object whose
	// field keeps the text's lines names the file's line from it.
	TextLine int `json:"-"`
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteByte(':')
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:", e.Line)
	}
	if b.Len() > 0 {
		b.WriteByte(' ')
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	if e.Object != "" {
		// After the message, so that "FILE:LINE: FIELD: " reads as a
		// spec's problem does.
		fmt.Fprintf(&b, " (in %s)", e.Object)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the Cause, so errors.Is and errors.As see it.
func (e *FieldError) Unwrap() error { return e.Cause }

// Errors is every problem found in a spec, in document order.
type Errors []*FieldError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Is makes errors.Is(err, ErrInvalid) true.
func (es Errors) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the problems, so errors.Is and errors.As look at each.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// ErrorList collects FieldErrors. The renderers use it too, so that a
// problem found while rendering names its spec field just as validation
// does, and the CLI lists both the same way.
type ErrorList struct{ list Errors }

// Add records a problem with field.
func (c *ErrorList) Add(field, format string, args ...any) {
	c.list = append(c.list, &FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Err returns the problems as Errors, or nil when there are none.
func (c *ErrorList) Err() error {
	if len(c.list) == 0 {
		return nil
	}
	return c.list
}

// AsErrors returns the field errors inside err, or nil if err holds none.
func AsErrors(err error) Errors {
	if err == nil {
		return nil
	}
	var es Errors
	if errors.As(err, &es) {
		return es
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		return Errors{fe}
	}
	return nil
}

// PathClaims records which spec field writes each path in the guest, for
// the rule that two fields may not write one path: neither agent says
// which write would win, so the cloud-init and Ignition renderings of the
// spec would differ. Validate checks spec.files with it; each renderer
// adds the files it generates (units, mounts, /etc/hostname…).
type PathClaims map[string]string // path → the field that writes it

// Claim records that field writes path and returns true, or, when another
// field already writes it, adds that problem to errs and returns false.
func (c PathClaims) Claim(errs *ErrorList, path, field string) bool {
	if prev, dup := c[path]; dup {
		errs.Add(field, "%s is already written by %s", path, prev)
		return false
	}
	c[path] = field
	return true
}
