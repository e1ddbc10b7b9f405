package bootreport

import (
	"strings"
	"testing"
)

func TestParseBaseURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://192.0.2.1:8080":       "http://192.0.2.1:8080",
		"http://192.0.2.1:8080/":      "http://192.0.2.1:8080",
		"https://mds.example/prefix/": "https://mds.example/prefix",
		"http://[2001:db8::1]:80":     "http://[2001:db8::1]:80",
	} {
		if got, err := ParseBaseURL(in); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	for in, why := range map[string]string{
		"":               "absolute",
		"192.0.2.1:8080": "",
		"/relative":      "absolute",
		"ftp://h/":       "http",
		"http:opaque":    "host",
		"http://u:p@h/":  "user information",
		"http://h/?q=1":  "query",
		"http://h/?":     "query",
		"http://h/#f":    "fragment",
		"http://h/#":     "fragment",
		"http://h\x7f/":  "not a URL",
	} {
		_, err := ParseBaseURL(in)
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v, want an error about %q", in, err, why)
		}
	}
	if got := ReportURL("http://h/p"); got != "http://h/p"+ReportPath {
		t.Errorf("ReportURL: %q", got)
	}
}
