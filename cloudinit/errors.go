package cloudinit

import (
	"fmt"

	"github.com/vminit/vminit/spec"
)

// errList collects problems as spec.FieldErrors, so callers (the CLI) list
// them with the same field paths that validation uses.
type errList struct{ list spec.Errors }

func (e *errList) add(field, format string, args ...any) {
	e.list = append(e.list, &spec.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (e *errList) err() error {
	if len(e.list) == 0 {
		return nil
	}
	return e.list
}
