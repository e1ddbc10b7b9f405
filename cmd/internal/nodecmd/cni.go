package nodecmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/vminit/vminit/internal/lib/atomicfile"
)

// cniPath is the pod data path's installation on a node: vminit-cni in
// the CNI bin directory and its entry in the pod network's conflist,
// kept there while the CNI rewrites its file.
type cniPath struct {
	confDir, binDir string
	plugin          string // the vminit-cni binary to copy
	agent           string // the entry's agent, IP:PORT
	agent6          string // the entry's agent6, [IP]:PORT, or "" on a node without IPv6
	interval        time.Duration
	log             *slog.Logger

	// edited is the conflist that holds our entry ("" when none), and
	// problem the last sync's error as logged (so a lasting one is
	// logged once, not at every interval).
	edited  string
	problem string
}

// pollInterval is how often the host path checks its table, and
// backstopInterval how often the cni path reads the conf dir when no
// change to it was notified. The cni path follows the conf dir by
// inotify (watchDir): a CNI's rewrite of its file is re-chained as soon
// as the rename lands, so that a virt-launcher pod set up right after it
// still gets the redirect; the slow poll catches what a notification
// cannot (the directory itself replaced, an inotify limit reached, a
// system without inotify).
const (
	pollInterval     = time.Second
	backstopInterval = 10 * time.Second
)

func (c *cniPath) describe() string {
	to := c.agent
	if c.agent6 != "" {
		to += " and " + c.agent6
	}
	return fmt.Sprintf("vminit-cni in %s, chained in the first network configuration of %s, redirecting to %s", c.binDir, c.confDir, to)
}

// install copies the plugin, then adds its entry (in that order: a
// runtime never reads an entry whose binary is missing). Every problem
// that stops it is an error naming the file and what to do.
func (c *cniPath) install(context.Context) error {
	for _, d := range []struct{ flag, dir string }{{"--cni-conf-dir", c.confDir}, {"--cni-bin-dir", c.binDir}} {
		if err := writable(d.dir); err != nil {
			return fmt.Errorf("%s %s: %w", d.flag, d.dir, err)
		}
	}
	// Before anything is written: a node it cannot work on is left as
	// it was.
	if _, _, err := c.primary(); err != nil {
		return err
	}
	if err := c.copyPlugin(); err != nil {
		return err
	}
	if err := c.sync(); err != nil {
		c.removePlugin()
		return err
	}
	return nil
}

// writable refuses a directory vminit-node cannot replace files in,
// before it changes anything.
func writable(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return errors.New("not a directory")
	}
	f, err := os.CreateTemp(dir, ".vminit-node-probe-*")
	if err != nil {
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
			return fmt.Errorf("cannot write there (vminit-node runs as root with the node's directory mounted read-write): %w", err)
		}
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// copyPlugin writes the plugin into the bin directory: a temporary file
// renamed into place, so a runtime running it meanwhile runs the old or
// the new one, never a part.
func (c *cniPath) copyPlugin() error {
	src, err := os.Open(c.plugin)
	if err != nil {
		return fmt.Errorf("--cni-plugin: %w", err)
	}
	defer src.Close()
	dst := filepath.Join(c.binDir, pluginType)
	if err := atomicfile.Write(dst, 0o755, func(w io.Writer) error {
		_, err := io.Copy(w, src)
		return err
	}); err != nil {
		return fmt.Errorf("installing vminit-cni: %w", err)
	}
	c.log.Info("vminit-node: installed the CNI plugin", "file", dst)
	return nil
}

func (c *cniPath) removePlugin() error {
	dst := filepath.Join(c.binDir, pluginType)
	if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing vminit-cni: %w", err)
	}
	c.log.Info("vminit-node: removed the CNI plugin", "file", dst)
	return nil
}

// primary is the node's pod network configuration, the first file of the
// conf dir in lexical order with an extension a runtime reads, as
// kubelet's runtimes pick it, read and checked.
func (c *cniPath) primary() (string, *conflist, error) {
	entries, err := os.ReadDir(c.confDir)
	if err != nil {
		return "", nil, fmt.Errorf("--cni-conf-dir: %w", err)
	}
	for _, e := range entries { // sorted by name
		if e.IsDir() || !slices.Contains(confExts, filepath.Ext(e.Name())) {
			continue
		}
		path := filepath.Join(c.confDir, e.Name())
		data, err := readBounded(path)
		if err != nil {
			return "", nil, err
		}
		list, err := parseConflist(path, data)
		return path, list, err
	}
	return "", nil, fmt.Errorf("--cni-conf-dir %s holds no network configuration (*.conflist, *.conf, *.json): the pod network's CNI writes it, so start vminit-node once the CNI is installed", c.confDir)
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfSize+1))
	if err == nil && len(data) > maxConfSize {
		err = fmt.Errorf("%s: larger than %d bytes", path, maxConfSize)
	}
	return data, err
}

// sync puts our entry in the primary conflist, once, and takes it out of
// the file that held it if the primary is another file now.
func (c *cniPath) sync() error {
	path, list, err := c.primary()
	if err != nil {
		return err
	}
	if c.edited != "" && c.edited != path {
		if err := c.removeEntry(c.edited); err != nil {
			return err
		}
	}
	want, err := list.with(c.agent, c.agent6)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	c.edited = path
	if bytes.Equal(want, list.data) {
		return nil
	}
	if err := replace(path, want); err != nil {
		return fmt.Errorf("adding vminit-cni to %s: %w", path, err)
	}
	c.log.Info("vminit-node: chained vminit-cni in the pod network's configuration", "file", path, "agent", c.agent)
	return nil
}

// removeEntry takes our entries out of path, if it is still there and
// holds any.
func (c *cniPath) removeEntry(path string) error {
	data, err := readBounded(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	spans, err := pluginSpans(data)
	if err != nil || count(spans, pluginType) == 0 {
		return nil // not ours to fix
	}
	without := (&conflist{data: data, plugins: spans}).without()
	if err := replace(path, without); err != nil {
		return fmt.Errorf("removing vminit-cni from %s: %w", path, err)
	}
	c.log.Info("vminit-node: removed vminit-cni from the pod network's configuration", "file", path)
	return nil
}

// replace writes data to path atomically, keeping the file's mode.
func replace(path string, data []byte) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, fi.Mode().Perm(), func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// watch syncs at each change to the conf dir and at every interval until
// ctx ends: a CNI that rewrites its file (at its agent's start, on an
// upgrade) drops our entry, and a new file may become the primary.
func (c *cniPath) watch(ctx context.Context) {
	changed, err := watchDir(ctx, c.confDir)
	if err != nil {
		c.log.Warn("vminit-node: cannot follow the CNI configuration directory's changes; reading it at every interval only, "+
			"so a virt-launcher pod set up within that interval of the CNI rewriting its file gets no redirect",
			"dir", c.confDir, "interval", c.interval, "err", err)
	}
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed: // nil without inotify: never
		case <-t.C:
		}
		c.resync()
	}
}

// resync is one sync of watch, its failures logged once while they last.
func (c *cniPath) resync() {
	err := c.sync()
	switch {
	case err != nil && err.Error() != c.problem:
		c.log.Error("vminit-node: cannot chain vminit-cni; virt-launcher pods created meanwhile get no redirect", "err", err)
		c.problem = err.Error()
	case err == nil && c.problem != "":
		c.log.Info("vminit-node: vminit-cni is chained again", "file", c.edited)
		c.problem = ""
	}
}

// every calls f at every interval until ctx ends: the host path checks
// that its table is still there.
func every(ctx context.Context, interval time.Duration, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// remove takes every vminit-cni entry out of the conf dir's
// configuration lists (the one it edited, and any an agent killed before
// its clean-up left in a file that is no longer the primary), then the
// binary.
func (c *cniPath) remove() error {
	var errs []error
	entries, err := os.ReadDir(c.confDir)
	if err != nil {
		errs = append(errs, fmt.Errorf("--cni-conf-dir: %w", err))
	}
	for _, e := range entries {
		if !e.IsDir() && filepath.Ext(e.Name()) == ".conflist" {
			errs = append(errs, c.removeEntry(filepath.Join(c.confDir, e.Name())))
		}
	}
	c.edited = ""
	return errors.Join(append(errs, c.removePlugin())...)
}
