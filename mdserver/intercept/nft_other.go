//go:build !linux

package intercept

import (
	"errors"
	"fmt"
)

// errNotLinux: nftables is Linux's.
var errNotLinux = fmt.Errorf("vminit's nftables table needs Linux: %w", errors.ErrUnsupported)

// Install needs Linux.
func (t *Table) Install(netnsFd int) error { return errNotLinux }

// Remove needs Linux.
func Remove(netnsFd int) error { return errNotLinux }

// Check needs Linux.
func (t *Table) Check(netnsFd int) error { return errNotLinux }
