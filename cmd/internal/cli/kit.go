package cli

import "github.com/vminit/vminit/cmd/internal/cmdkit"

// Exit codes (cmdkit's, which every program shares).
const (
	ExitOK      = cmdkit.ExitOK
	ExitInvalid = cmdkit.ExitInvalid
	ExitUsage   = cmdkit.ExitUsage
)

// The kit's errors under the names this package's commands use.
type (
	usageError      = cmdkit.UsageError
	exitError       = cmdkit.ExitError
	alreadyReported = cmdkit.Reported
)

var usagef = cmdkit.Usagef
