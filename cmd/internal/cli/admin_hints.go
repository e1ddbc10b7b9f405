package cli

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// hintTransport is the admin client's transport, turning the answers of
// a listener that is not what --server says into errors that name the
// flag to change (a metadata port answered a bare 404, and TLS
// mismatches surfaced as the TLS stack's own words).
type hintTransport struct{ next http.RoundTripper }

// plainToTLS is what net/http's server answers a plain-HTTP request on a
// TLS listener.
const plainToTLS = "Client sent an HTTP request to an HTTPS server"

func (h hintTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	server := req.URL.Scheme + "://" + req.URL.Host
	resp, err := h.next.RoundTrip(req)
	if err != nil {
		return nil, tlsHint(err, server, req.URL.Host)
	}
	switch {
	case resp.StatusCode == http.StatusBadRequest && req.URL.Scheme == "http":
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		resp.Body.Close()
		if bytes.Contains(body, []byte(plainToTLS)) {
			return nil, fmt.Errorf("--server %s: that listener speaks HTTPS: give --server https://%s (and --ca-file CA.pem if its certificate is self-signed)", server, req.URL.Host)
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
	case resp.StatusCode == http.StatusNotFound && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json"):
		// The admin API answers every 404 with its JSON error body; a
		// guests' listener answers with none (or one line of text).
		resp.Body.Close()
		return nil, fmt.Errorf("--server %s is not an admin listener: %s answered 404 as serve's guests' --listen does; give the address of serve's --admin-listen", server, req.URL.Path)
	}
	return resp, nil
}

// tlsHint adds to a TLS failure the flag that fixes it.
func tlsHint(err error, server, host string) error {
	var unknown x509.UnknownAuthorityError
	var name x509.HostnameError
	var alert tls.AlertError
	var record tls.RecordHeaderError
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("%w\n(--server %s: its certificate is signed by a CA this host does not trust, e.g. a self-signed one: give --ca-file with the CA that signed serve's --admin-tls-cert)", err, server)
	case errors.As(err, &name):
		return fmt.Errorf("%w\n(--server %s: its certificate does not name %s: give --server the name or address it was issued for)", err, server, host)
	case errors.As(err, &record) && string(record.RecordHeader[:]) == "HTTP/":
		// What http.Client reports as "server gave HTTP response to
		// HTTPS client".
		return fmt.Errorf("%w\n(--server %s: that listener speaks plain HTTP: give --server http://%s)", err, server, host)
	case errors.As(err, &alert) && strings.Contains(err.Error(), "certificate required"):
		return fmt.Errorf("%w\n(--server %s requires a client certificate: give --cert and --key)", err, server)
	}
	return err
}
