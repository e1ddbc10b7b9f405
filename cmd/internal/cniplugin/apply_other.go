//go:build !linux

package cniplugin

import (
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"
)

var errNotLinux = fmt.Errorf("vminit-cni needs Linux: %w", errors.ErrUnsupported)

func (p plugin) add(*skel.CmdArgs) error   { return errNotLinux }
func (p plugin) check(*skel.CmdArgs) error { return errNotLinux }

// del has nothing to remove where nothing could be added.
func (p plugin) del(*skel.CmdArgs) error { return nil }
