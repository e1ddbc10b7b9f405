package firstboot

import (
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestParseFilter: a query reads as the filter it names, and Values
// writes it back the same.
func TestParseFilter(t *testing.T) {
	q, _ := url.ParseQuery("state=failed,stalled&state=failed&agent=ignition&name=web&min-age=90s&max-age=1h&sort=name")
	f, err := ParseFilter(q)
	if err != nil {
		t.Fatal(err)
	}
	want := Filter{States: []State{Stalled, Failed}, Agent: "ignition", Name: "web", MinAge: 90 * time.Second, MaxAge: time.Hour}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("got %+v\nwant %+v", f, want)
	}
	back, err := ParseFilter(f.Values())
	if err != nil || !reflect.DeepEqual(back, want) {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	if got := f.Values().Encode(); got != "agent=ignition&max-age=1h0m0s&min-age=1m30s&name=web&state=stalled&state=failed" {
		t.Errorf("Values: %s", got)
	}
	// A mixed fleet's Windows instances are selected as the others are.
	if f, err := ParseFilter(url.Values{QueryAgent: {"cloudbase-init"}}); err != nil || f.Agent != "cloudbase-init" {
		t.Errorf("agent=cloudbase-init: %+v, %v", f, err)
	}
	if f, err := ParseFilter(url.Values{}); err != nil || !reflect.DeepEqual(f, Filter{}) {
		t.Errorf("empty query: %+v, %v", f, err)
	}
}

// TestParseFilterErrors: every bad parameter is named, all at once.
func TestParseFilterErrors(t *testing.T) {
	q, _ := url.ParseQuery("state=done,bogus&agent=windows&min-age=-1s&max-age=soon")
	_, err := ParseFilter(q)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`state="bogus"`, `agent="windows"`, `min-age="-1s"`, `max-age="soon"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q not in %v", want, err)
		}
	}
	q, _ = url.ParseQuery("min-age=2h&max-age=1h")
	if _, err := ParseFilter(q); err == nil || !strings.Contains(err.Error(), "min-age=2h0m0s is more than max-age=1h0m0s") {
		t.Errorf("min > max: %v", err)
	}
}
