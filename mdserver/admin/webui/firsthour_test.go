package webui_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// The page as an operator meets it in the first hour,
// served by the admin handler as `vminit serve --admin-listen` serves it.

// journal is a failed unit's log as an Ignition guest reports it: 2 KiB
// of lines, the cause last.
func journal() string {
	var b strings.Builder
	for i := 0; b.Len() < 1900; i++ {
		fmt.Fprintf(&b, "Nov 29 03:00:%02d app-01 systemd[1]: Starting app.service - the app, try %d…\n", i%60, i)
	}
	b.WriteString("Nov 29 03:01:00 app-01 app[412]: error while loading shared libraries: libssl.so.1.1")
	return b.String()
}

// firstHour is a fleet of a done boot (with addresses, a host name and a
// success carrying a message), a failed cloud-init boot and a failed
// Ignition boot whose error is a whole journal.
func firstHour(t testing.TB) *fleet {
	f := newFleet(t, []instance{
		{name: "app-01", agent: "ignition"},
		{name: "db-01", agent: "cloud-init"},
		{name: "web-01", agent: "cloud-init", addrs: []string{"192.0.2.10", "2001:db8::10"}, fqdn: "web-01.example.com"},
	})
	f.cloudInit(t, "web-01", "", "", "")
	f.event(t, "web-01", firstboot.KindFinish, "modules-final/config-final-message", firstboot.ResultSuccess, "Cloud-init v. 22.4 finished")
	f.cloudInit(t, "db-01", "", "config-scripts-user", "Failed to run module scripts-user: exit status 1")
	f.boots.Fetch("app-01", uid("app-01"), "ignition", "ignition", "/ignition/config")
	f.clock.Advance(40 * time.Second)
	f.boots.Report("app-01", uid("app-01"), "ignition", firstboot.Report{Failed: true, Message: "degraded: 1 failed unit",
		Errors: []firstboot.Failure{{Unit: "app.service", Message: journal()}}})
	return f
}

// TestBrowserFirstHour walks the page: the login says what the admin
// token is; the stage column is the CLI's (firstboot.Status.Where); a
// failed Ignition row takes one line, its whole journal on the instance
// page; the instance page shows the addresses, the host name and what
// the guest is served; an event's message is coloured by its outcome.
func TestBrowserFirstHour(t *testing.T) {
	browser := startBrowser(t)
	f := firstHour(t)
	srv := adminServer(t, f, token, false)
	ctx := tab(t, browser)

	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/login"), chromedp.WaitVisible(chromedp.ID("token")))
	hint := eval[string](t, ctx, `(document.getElementById('token-hint') || {textContent: ''}).textContent`)
	for _, want := range []string{"--admin-token-file", "vminit-server-admin-token", "$VMINIT_ADMIN_TOKEN"} {
		if !strings.Contains(hint, want) {
			t.Errorf("the login form does not say where the admin token comes from (%s): %q", want, hint)
		}
	}

	login(t, ctx, srv.URL)
	stage := func(name string) string {
		return eval[string](t, ctx, `document.querySelector('tr[data-name="`+name+`"]').cells[3].textContent`)
	}
	for name, want := range map[string]string{"web-01": "", "db-01": "modules-final/config-scripts-user", "app-01": "app.service"} {
		if got := stage(name); got != want {
			t.Errorf("%s's stage/module %q, want %q (the CLI's STAGE)", name, got, want)
		}
	}
	rowHeight := func(name string) float64 {
		return eval[float64](t, ctx, `document.querySelector('tr[data-name="`+name+`"]').getBoundingClientRect().height`)
	}
	if app, web := rowHeight("app-01"), rowHeight("web-01"); app > web+1 {
		t.Errorf("the failed Ignition row is %.0f px high, a done row %.0f: its error takes more than one line", app, web)
	}

	// The row's error leads to the instance page, which has all of it.
	run(t, ctx, clickLoad(chromedp.CSS(`tr[data-name="app-01"] td.error a`)), chromedp.WaitVisible(chromedp.ID("errors")))
	if e := eval[string](t, ctx, `document.getElementById('errors').innerText`); !strings.Contains(e, "libssl.so.1.1") || !strings.Contains(e, "try 0…") {
		t.Errorf("the instance page's errors lack the journal:\n%s", e)
	}

	// The instance page: the record's facts and what the guest is served.
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/instances/web-01"), chromedp.WaitVisible(chromedp.ID("events")))
	// The stream's first render replaces the page's part: a click before
	// it may land on a node it then removes.
	waitFor(t, ctx, `Number(document.body.dataset.renders) >= 1`)
	facts := eval[string](t, ctx, `document.querySelector('dl.facts').innerText`)
	for _, want := range []string{"192.0.2.10, 2001:db8::10", "web-01 (web-01.example.com)"} {
		if !strings.Contains(facts, want) {
			t.Errorf("the instance page lacks %q:\n%s", want, facts)
		}
	}
	// Colours by outcome: a success's message is not an error's red.
	color := func(sel string) string {
		return eval[string](t, ctx, `getComputedStyle(document.querySelector('`+sel+`')).color`)
	}
	red := "rgb(198, 45, 45)"
	if c := color(`#events tr.success td.message`); c == red {
		t.Errorf("a success's message is red (%s)", c)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('#served a[data-dialect]').length`); n == 0 {
		t.Fatal("the instance page has no link to what the guest is served")
	}
	run(t, ctx, clickLoad(chromedp.CSS(`#served a[data-dialect="nocloud"]`)), chromedp.WaitVisible(chromedp.CSS("pre.served")))
	if p := eval[string](t, ctx, `document.body.innerText`); !strings.Contains(p, "user-data") || !strings.Contains(p, "#cloud-config") ||
		!strings.Contains(p, "fqdn: web-01.example.com") {
		t.Errorf("the served page:\n%s", p)
	}

	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/instances/db-01"), chromedp.WaitVisible(chromedp.ID("events")))
	if c := color(`#events tr.fail td.message`); c != red {
		t.Errorf("a failure's message is %s, want red", c)
	}
	if c := color(`#errors td.message`); c != red {
		t.Errorf("an error is %s, want red", c)
	}
}

// TestServedPage: what a guest is served, per dialect, behind the UI's
// own login; a dialect there is not and an instance there is not are
// named.
func TestServedPage(t *testing.T) {
	f := firstHour(t)
	srv := adminServer(t, f, token, false)
	c := noRedirect(srv)
	for _, tc := range []struct {
		path   string
		status int
		want   string
	}{
		{"/ui/instances/web-01/served", http.StatusOK, "vminit instances preview web-01 --dialect nocloud"},
		{"/ui/instances/web-01/served?dialect=ec2", http.StatusOK, "latest/meta-data"},
		{"/ui/instances/web-01/served?dialect=gce", http.StatusBadRequest, "dialect=&#34;gce&#34;: want one of nocloud, configdrive, ignition, ec2, openstack."},
		{"/ui/instances/nobody/served", http.StatusNotFound, "No such instance"},
	} {
		a := get(t, c, srv.URL+tc.path, "Authorization", "Bearer "+token)
		if a.status != tc.status || !strings.Contains(a.body, tc.want) {
			t.Errorf("%s: %d, want %d and %q:\n%s", tc.path, a.status, tc.status, tc.want, a.body)
		}
	}
	if a := get(t, c, srv.URL+"/ui/instances/web-01/served"); a.status != http.StatusSeeOther {
		t.Errorf("the served page without a session: %d", a.status)
	}
}
