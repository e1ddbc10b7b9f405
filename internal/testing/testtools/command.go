package testtools

import (
	"context"
	"io"
	"os"
	"testing"
	"time"
)

// Command is what RunUntilStopped needs of a command (a *cobra.Command),
// so that this package does not import cobra.
type Command interface {
	SetErr(io.Writer)
	SetOut(io.Writer)
	SetArgs([]string)
	ExecuteContext(context.Context) error
}

// RunUntilStopped runs cmd with args and a context that ends after a
// second, as SIGTERM ends a server's, and returns its standard error and
// error. A command still running 20 s later failed the test; fifo (a
// FIFO a flag names) is then opened for writing and closed, which ends a
// reader blocked on it.
func RunUntilStopped(t *testing.T, cmd Command, fifo string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &SyncBuffer{}
	cmd.SetErr(stderr)
	cmd.SetOut(io.Discard)
	cmd.SetArgs(args)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	select {
	case err := <-done:
		return stderr.String(), err
	case <-time.After(time.Second):
		cancel() // SIGTERM
	}
	select {
	case err := <-done:
		return stderr.String(), err
	case <-time.After(20 * time.Second):
		t.Errorf("%v: still running 20 s after its context ended (blocked on the FIFO?)", args)
		if w, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
			w.Close()
		}
		return stderr.String(), <-done
	}
}
