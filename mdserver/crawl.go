package mdserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/seed"
)

// maxPreviewFetches bounds a preview crawl; the EC2 tree of an instance
// with many interfaces is a few hundred paths.
const maxPreviewFetches = 2000

// Crawl returns what a guest of rec is served in a dialect (DialectEC2,
// DialectOpenStack, DialectNoCloud or DialectIgnition), fetched from h
// itself the way the guest's agent does, as the dialect's file says: for
// EC2 and OpenStack, every listed name, directories recursively, public
// keys by index; for NoCloud, the four seed files; for Ignition, the
// config. Each file's Path is the URL path it is served at. The requests skip identification,
// rate limits, metrics and audit lines: they are the administrator's, not
// the guest's.
//
// The error says what the guest would not get: a file that failed to
// render (its error, which may hold spec.Errors), or the reason the crawl
// stopped early. The files fetched are returned with it.
func (h *Handler) Crawl(ctx context.Context, rec *registry.Record, dialect string) ([]seed.File, error) {
	d := dialectNamed(dialect)
	if d == nil || d.crawl == nil {
		return nil, fmt.Errorf("no crawl for dialect %q", dialect)
	}
	c := &crawler{h: h, ctx: ctx, rec: rec}
	d.crawl(c)
	return c.files, errors.Join(c.err, c.failed)
}

type crawler struct {
	h       *Handler
	ctx     context.Context
	rec     *registry.Record
	files   []seed.File
	fetches int
	err     error // why the crawl stopped
	failed  error // the first file that failed to render
}

func (c *crawler) get(path string) (int, []byte) {
	if c.fetches++; c.fetches > maxPreviewFetches {
		if c.err == nil {
			c.err = fmt.Errorf("more than %d paths; the preview stops there", maxPreviewFetches)
		}
		return 0, nil
	}
	req, err := http.NewRequestWithContext(c.ctx, http.MethodGet, path, nil)
	if err != nil {
		c.err = err
		return 0, nil
	}
	// No guest: what names this server in the data (the first-boot
	// report's URL, a pointer config's) names PreviewHost.
	req.Host = PreviewHost
	rw := &recorder{header: http.Header{}, rec: c.rec}
	c.h.mux.ServeHTTP(rw, req)
	if rw.status == 0 {
		rw.status = http.StatusOK
	}
	if rw.err != nil && c.failed == nil {
		c.failed = fmt.Errorf("%s: %w", path, rw.err)
	}
	return rw.status, rw.body.Bytes()
}

// leaf adds the file at path, if the guest would get one.
func (c *crawler) leaf(path string) {
	if status, b := c.get(path); status == http.StatusOK {
		c.files = append(c.files, seed.File{Path: path, Data: b})
	}
}

// tree walks a listing: "name/" is a directory, "0=key-name" is the
// directory "0/" (EC2 public keys), anything else a file.
func (c *crawler) tree(dir string) {
	status, b := c.get(dir)
	if status != http.StatusOK || c.err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || c.err != nil {
			continue
		}
		if i := strings.IndexByte(line, '='); i > 0 {
			line = line[:i] + "/"
		}
		if strings.HasSuffix(line, "/") {
			c.tree(dir + line)
		} else {
			c.leaf(dir + line)
		}
	}
}

// recorder is the ResponseWriter of a crawl request.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	rec    *registry.Record
	err    error // the rendering error a 500 stands for
}

func (r *recorder) record() *registry.Record { return r.rec }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}
