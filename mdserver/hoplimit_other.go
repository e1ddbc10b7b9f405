//go:build !unix

package mdserver

import "errors"

var errUnsupported = errors.New("setting the IP TTL is supported on Unix only")

func setTTL(fd uintptr, hops int, v6 bool) error { return errUnsupported }

func getTTL(fd uintptr) (int, error) { return 0, errUnsupported }
