// Package outcome remembers how the last attempt of a repeated operation
// went (a store write retried at every interval), so that its caller logs
// a change of outcome once, not at every attempt: the operator reads
// "writes fail" when they start failing and "go through again" when they
// recover, and a store down for an hour fills no log.
package outcome

import "sync"

// Last is the last attempt's outcome: why it failed, "" when it went
// through. The zero value has not failed. It is safe for concurrent use.
type Last struct {
	mu  sync.Mutex
	why string
}

// Record sets the latest attempt's outcome and reports whether it differs
// from the one before.
func (l *Last) Record(why string) (changed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	changed = why != l.why
	l.why = why
	return changed
}

// Failing reports whether the last attempt failed.
func (l *Last) Failing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.why != ""
}
