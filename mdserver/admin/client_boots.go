package admin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/vminit/vminit/mdserver/firstboot"
)

// Boot returns the first boot of the instance called name, stages and
// events included.
func (c *Client) Boot(ctx context.Context, name string) (*firstboot.Status, error) {
	var st firstboot.Status
	if err := c.call(ctx, http.MethodGet, instancePath(name)+"/boot", nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Boots returns the first boots that pass f, without their stages and
// events, and the count of each state among them: every page of GET
// /v1/boots, read in turn (clientBootsPage rows each), the counts those
// of the rows read.
func (c *Client) Boots(ctx context.Context, f firstboot.Filter) (*firstboot.Summary, error) {
	var rows []firstboot.Status
	after := ""
	for {
		page, err := c.BootsPage(ctx, f, clientBootsPage, after)
		if err != nil {
			return nil, err
		}
		rows = append(rows, page.Instances...)
		if page.Continue == "" {
			break
		}
		if page.Continue == after || len(page.Instances) == 0 {
			return nil, fmt.Errorf("GET %s: the server answered the same page again", bootsPath(f, false))
		}
		after = page.Continue
	}
	// Counted again: the fleet may have changed between pages.
	sum := firstboot.Counted(rows)
	return &sum, nil
}

// clientBootsPage is the rows Client.Boots asks for per page.
var clientBootsPage = MaxBootsPage

// BootsPage returns one page of the first boots that pass f: at most
// limit rows (0: the server's default, DefaultBootsPage), after the page
// whose Continue is cont ("": the first page). Its Continue asks for the
// next page, and is "" on the last.
func (c *Client) BootsPage(ctx context.Context, f firstboot.Filter, limit int, cont string) (*firstboot.Summary, error) {
	q := f.Values()
	if limit > 0 {
		q.Set(paramLimit, strconv.Itoa(limit))
	}
	if cont != "" {
		q.Set(paramContinue, cont)
	}
	path := "/v1/boots"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var sum firstboot.Summary
	if err := c.call(ctx, http.MethodGet, path, nil, &sum); err != nil {
		return nil, err
	}
	return &sum, nil
}

func bootsPath(f firstboot.Filter, watch bool) string {
	q := f.Values()
	if watch {
		q.Set(paramWatch, "true")
	}
	if len(q) == 0 {
		return "/v1/boots"
	}
	return "/v1/boots?" + q.Encode()
}

// WatchBoots calls fn with the summary of the boots that pass f at once,
// then with each new one, the last with the changes the server sends
// applied (firstboot.Summary.Apply), until ctx ends (it returns
// ctx's error), fn returns an error (it returns that error), or the
// server cannot be reached or refuses. A stream the server ends (each
// lasts minutes) is opened again. Client.HTTP's Timeout does not apply
// to the stream; ctx bounds it.
func (c *Client) WatchBoots(ctx context.Context, f firstboot.Filter, fn func(firstboot.Summary) error) error {
	// A new stream starts with the summary the last one ended with: fn
	// hears only of changes.
	var last *firstboot.Summary
	changed := func(sum firstboot.Summary) error {
		if last != nil && reflect.DeepEqual(sum, *last) {
			return nil
		}
		last = &sum
		return fn(sum)
	}
	for {
		got, err := c.watchOnce(ctx, f, changed)
		switch {
		case err != nil:
			return err
		case ctx.Err() != nil:
			return ctx.Err()
		case got == 0:
			// A stream that ended without a summary is no stream:
			// reconnecting at once would spin.
			return fmt.Errorf("GET %s: the server ended the watch without an answer", bootsPath(f, true))
		}
	}
}

// errStream marks an error of the stream itself, not of fn.
var errStream = errors.New("watch stream")

// watchOnce reads one watch stream to its end, and returns how many
// summaries it handed fn.
func (c *Client) watchOnce(ctx context.Context, f firstboot.Filter, fn func(firstboot.Summary) error) (int, error) {
	path := bootsPath(f, true)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.URL, "/")+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "text/event-stream")
	hc := http.Client{}
	if c.HTTP != nil {
		hc = *c.HTTP
	}
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
		return 0, responseError(http.MethodGet, path, resp, data)
	}
	n := 0
	var cur firstboot.Summary // the summary, as changed since
	err = readEvents(resp.Body, maxResponse, func(event string, data []byte) error {
		if event != eventSummary && event != eventChanges {
			return nil // an event a newer server sends; this client does not know it
		}
		var sum firstboot.Summary
		if err := json.Unmarshal(data, &sum); err != nil {
			return fmt.Errorf("%w: GET %s: %s: %v", errStream, path, event, err)
		}
		switch {
		case event == eventSummary:
			cur = sum
		case n == 0:
			return fmt.Errorf("%w: GET %s: changes before a summary", errStream, path)
		default:
			cur.Apply(sum)
		}
		n++
		return fn(cur)
	})
	var fe fnError
	switch {
	case errors.As(err, &fe):
		return n, fe.error
	case errors.Is(err, errStream), err != nil && n == 0:
		return n, err
	}
	// A stream ended, or lost midway: WatchBoots opens it again.
	return n, nil
}

// fnError carries the callback's error through readEvents.
type fnError struct{ error }

// readEvents reads server-sent events from r, calling fn with each
// event's name and data; an event larger than limit is an error. Comments
// (keep-alives) and fields other than event and data are skipped.
func readEvents(r io.Reader, limit int, fn func(event string, data []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), limit)
	var (
		event string
		data  bytes.Buffer
	)
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if data.Len() > 0 {
				if err := fn(event, bytes.TrimSuffix(data.Bytes(), []byte("\n"))); err != nil {
					if errors.Is(err, errStream) {
						return err
					}
					return fnError{err}
				}
			}
			event = ""
			data.Reset()
		case line[0] == ':':
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "event":
				event = string(value)
			case "data":
				if data.Len()+len(value) > limit {
					return fmt.Errorf("%w: an event larger than %d bytes", errStream, limit)
				}
				data.Write(value)
				data.WriteByte('\n')
			}
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return fmt.Errorf("%w: a line larger than %d bytes", errStream, limit)
	}
	return sc.Err()
}
