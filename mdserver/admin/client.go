package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/vminit/vminit/spec"
)

// Client calls the admin API of a running server; `vminit instances` is
// built on it.
type Client struct {
	// URL is the API's base URL, e.g. https://mds.example:8443.
	URL string
	// Token is the bearer token (Options.Token of the server).
	Token string
	// HTTP sends the requests (its Transport carries the TLS settings);
	// nil means http.DefaultClient.
	HTTP *http.Client
}

// maxResponse bounds what a client reads of one answer (a preview of a
// large instance is a few megabytes).
const maxResponse = 64 << 20

// Error is a request the API refused for a reason other than an invalid
// spec (which is returned as spec.Errors): an unknown instance, a
// conflict, a wrong token, an unreachable store.
type Error struct {
	Method, Path string
	StatusCode   int
	Status       string   // e.g. "404 Not Found"
	Messages     []string // the ErrorBody's messages, if it had any
}

func (e *Error) Error() string {
	if len(e.Messages) == 0 {
		return fmt.Sprintf("%s %s: %s", e.Method, e.Path, e.Status)
	}
	return fmt.Sprintf("%s (%s)", strings.Join(e.Messages, "; "), e.Status)
}

// List returns every instance the server holds, by name.
func (c *Client) List(ctx context.Context) ([]InstanceSummary, error) {
	var l InstanceList
	if err := c.call(ctx, http.MethodGet, "/v1/instances", nil, &l); err != nil {
		return nil, err
	}
	return l.Instances, nil
}

// Get returns an instance's stored spec as YAML, defaults filled in.
func (c *Client) Get(ctx context.Context, name string) ([]byte, error) {
	return c.do(ctx, http.MethodGet, instancePath(name), nil)
}

// Put stores a spec document (YAML or JSON) under name, which must be its
// metadata.name. An invalid document is refused with spec.Errors, each
// with its line; files[].source.file is refused: inline the content.
func (c *Client) Put(ctx context.Context, name string, doc []byte) (*InstanceSummary, error) {
	var s InstanceSummary
	if err := c.call(ctx, http.MethodPut, instancePath(name), doc, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Delete removes an instance.
func (c *Client) Delete(ctx context.Context, name string) error {
	_, err := c.do(ctx, http.MethodDelete, instancePath(name), nil)
	return err
}

// Preview returns what the instance's guest would get in a dialect (one
// of PreviewDialects).
func (c *Client) Preview(ctx context.Context, name, dialect string) (*Preview, error) {
	var p Preview
	if err := c.call(ctx, http.MethodGet, instancePath(name)+"/preview?dialect="+url.QueryEscape(dialect), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

func instancePath(name string) string { return "/v1/instances/" + url.PathEscape(name) }

// call sends a request and decodes the JSON answer into v.
func (c *Client) call(ctx context.Context, method, path string, body []byte, v any) error {
	data, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("the server's answer to %s %s: %v", method, path, err)
	}
	return nil
}

// do sends a request and returns the body of a 2xx answer; any other
// answer becomes spec.Errors (422) or an *Error.
func (c *Client) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.URL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/yaml")
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return data, nil
	}
	return nil, responseError(method, path, resp, data)
}

// responseError is the error of a non-2xx answer whose body is data:
// spec.Errors for 422, else an *Error with the ErrorBody's messages.
func responseError(method, path string, resp *http.Response, data []byte) error {
	e := &Error{Method: method, Path: path, StatusCode: resp.StatusCode, Status: resp.Status}
	var eb ErrorBody
	if json.Unmarshal(data, &eb) != nil || len(eb.Errors) == 0 {
		return e
	}
	if resp.StatusCode == http.StatusUnprocessableEntity {
		return spec.Errors(eb.Errors)
	}
	for _, fe := range eb.Errors {
		e.Messages = append(e.Messages, fe.Error())
	}
	return e
}
