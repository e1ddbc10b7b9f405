package webui_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/lib/httpserver"
	"github.com/vminit/vminit/mdserver/admin"
	"github.com/vminit/vminit/mdserver/admin/webui"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// noRedirect is a client that shows redirects rather than following them.
func noRedirect(srv *httptest.Server) *http.Client {
	c := *srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

type answer struct {
	status int
	header http.Header
	body   string
	closed bool // the server closes the connection after it (Connection: close)
}

func do(t *testing.T, c *http.Client, req *http.Request) answer {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b), resp.Close}
}

func get(t *testing.T, c *http.Client, u string, hdr ...string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return do(t, c, req)
}

// postLogin posts the login form as the page at srv would.
func postLogin(t *testing.T, c *http.Client, srv *httptest.Server, tok, origin string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ui/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	return do(t, c, req)
}

// sessionCookie is the session a login's answer sets ("" for none).
func sessionCookie(a answer) string {
	for _, c := range (&http.Response{Header: a.header}).Cookies() {
		if c.Name == "vminit_ui_session" && c.MaxAge > 0 {
			return c.Name + "=" + c.Value
		}
	}
	return ""
}

// adminServer serves f through admin.NewHandler, as vminit serve does.
func adminServer(t *testing.T, f *fleet, tok string, tls bool) *httptest.Server {
	h := admin.NewHandler(f.store, admin.Options{Token: tok, Metadata: f.md})
	srv := httptest.NewUnstartedServer(h)
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// TestAdminMountsUI: the admin handler serves the page under /ui/, with
// its login open to anyone, the rest behind the bearer token or a
// session, and the session good for /ui/ only — never for the API.
func TestAdminMountsUI(t *testing.T) {
	f := showcase(t)
	srv := adminServer(t, f, token, false)
	c := noRedirect(srv)

	if a := get(t, c, srv.URL+"/ui/"); a.status != http.StatusSeeOther || a.header.Get("Location") != "/ui/login" {
		t.Fatalf("/ui/ without a session: %d %q, want a redirect to the login", a.status, a.header.Get("Location"))
	}
	if a := get(t, c, srv.URL+"/ui/stream"); a.status != http.StatusUnauthorized {
		t.Errorf("/ui/stream without a session: %d", a.status)
	}
	if a := get(t, c, srv.URL+"/ui/login"); a.status != http.StatusOK || !strings.Contains(a.body, `name="token"`) {
		t.Fatalf("login form: %d\n%s", a.status, a.body)
	}
	if a := get(t, c, srv.URL+"/ui/", "Authorization", "Bearer "+token); a.status != http.StatusOK || !strings.Contains(a.body, `id="fleet"`) {
		t.Fatalf("/ui/ with the bearer token: %d", a.status)
	}

	a := postLogin(t, c, srv, token, srv.URL)
	cookie := sessionCookie(a)
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/ui/" || cookie == "" {
		t.Fatalf("login: %d %q, cookie %q", a.status, a.header.Get("Location"), cookie)
	}
	sc := a.header.Get("Set-Cookie")
	for _, attr := range []string{"Path=/ui/", "HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(sc, attr) {
			t.Errorf("Set-Cookie %q lacks %s", sc, attr)
		}
	}
	if strings.Contains(sc, "Secure") {
		t.Errorf("Set-Cookie %q: Secure over plain HTTP (the browser would drop it)", sc)
	}
	if a := get(t, c, srv.URL+"/ui/", "Cookie", cookie); a.status != http.StatusOK || !strings.Contains(a.body, `data-name="web-01"`) {
		t.Fatalf("/ui/ with the session: %d", a.status)
	}
	if a := get(t, c, srv.URL+"/v1/instances", "Cookie", cookie); a.status != http.StatusUnauthorized {
		t.Errorf("the admin API took the session cookie: %d", a.status)
	}

	// A rotated token ends the session.
	rotated := adminServer(t, f, token+"-rotated", false)
	if a := get(t, noRedirect(rotated), rotated.URL+"/ui/", "Cookie", cookie); a.status != http.StatusSeeOther {
		t.Errorf("a session of the old token after rotation: %d", a.status)
	}
}

// TestLoginRefusals: a wrong token, a login posted from another site,
// and a forged, altered or expired session get nothing.
func TestLoginRefusals(t *testing.T) {
	f := showcase(t)
	srv := httptest.NewServer(f.ui(webui.Options{SessionTTL: time.Hour}))
	t.Cleanup(srv.Close)
	c := noRedirect(srv)

	if a := postLogin(t, c, srv, "not-the-token", srv.URL); a.status != http.StatusUnauthorized || sessionCookie(a) != "" ||
		!strings.Contains(a.body, "Wrong token.") {
		t.Errorf("wrong token: %d, cookie %q", a.status, sessionCookie(a))
	}
	if a := postLogin(t, c, srv, token, "http://evil.example"); a.status != http.StatusForbidden || sessionCookie(a) != "" {
		t.Errorf("cross-origin login: %d, cookie %q", a.status, sessionCookie(a))
	}
	cookie := sessionCookie(postLogin(t, c, srv, token, srv.URL))
	if cookie == "" {
		t.Fatal("no session")
	}
	for name, bad := range map[string]string{
		"altered expiry": regexp.MustCompile(`\.(\d)`).ReplaceAllString(cookie, ".9"),
		"forged":         "vminit_ui_session=v2.99999999999.AAAA.AAAA",
		"old version":    strings.Replace(cookie, "=v2.", "=v1.", 1),
		"empty":          "vminit_ui_session=",
	} {
		if a := get(t, c, srv.URL+"/ui/", "Cookie", bad); a.status != http.StatusSeeOther {
			t.Errorf("%s session %q: %d", name, bad, a.status)
		}
	}
	if a := get(t, c, srv.URL+"/ui/", "Cookie", cookie); a.status != http.StatusOK {
		t.Fatalf("the session: %d", a.status)
	}
	f.clock.Advance(time.Hour + time.Second)
	if a := get(t, c, srv.URL+"/ui/", "Cookie", cookie); a.status != http.StatusSeeOther {
		t.Errorf("an expired session: %d", a.status)
	}
}

// TestSecureCookieOverTLS: over TLS the session cookie is Secure.
func TestSecureCookieOverTLS(t *testing.T) {
	srv := adminServer(t, showcase(t), token, true)
	a := postLogin(t, noRedirect(srv), srv, token, srv.URL)
	if sc := a.header.Get("Set-Cookie"); sessionCookie(a) == "" || !strings.Contains(sc, "Secure") {
		t.Errorf("over TLS: %d, Set-Cookie %q", a.status, sc)
	}
}

// TestSecurityHeaders: every page, the login's too, forbids inline
// script, framing and sniffing.
func TestSecurityHeaders(t *testing.T) {
	f := showcase(t)
	srv := httptest.NewServer(f.ui(webui.Options{}))
	t.Cleanup(srv.Close)
	for _, p := range []string{"/ui/", "/ui/login", "/ui/instances/db-01", "/ui/nowhere"} {
		a := get(t, srv.Client(), srv.URL+p, "Authorization", "Bearer "+token)
		csp := a.header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: CSP %q", p, csp)
		}
		if a.header.Get("X-Frame-Options") != "DENY" || a.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", p, a.header)
		}
		if strings.Contains(a.body, "<script>") || regexp.MustCompile(`\son[a-z]+=`).MatchString(a.body) {
			t.Errorf("%s: inline script in the page", p)
		}
	}
}

// hostile are what a guest or a spec author could make the page show.
var hostile = []string{`<script>window.pwned=1</script>`, `"><img src=x onerror="window.pwned=2">`}

// hostileFleet is a fleet whose instance names and failure messages are
// markup (a store refuses such names; the page must not rely on it).
func hostileFleet(t testing.TB) *fleet {
	f := newFleet(t, []instance{{name: hostile[0], agent: "cloud-init"}, {name: hostile[1], agent: "cloud-init"}})
	for _, n := range hostile {
		f.cloudInit(t, n, "", "config-scripts-user", hostile[0]+hostile[1])
		f.boots.Fetch(n, uid(n), "cloud-init", "nocloud", "/"+hostile[1])
	}
	return f
}

// TestHostileTextEscaped: markup in names and messages is shown as text.
func TestHostileTextEscaped(t *testing.T) {
	f := hostileFleet(t)
	srv := httptest.NewServer(f.ui(webui.Options{}))
	t.Cleanup(srv.Close)
	pages := []string{"/ui/", "/ui/?name=" + url.QueryEscape(hostile[1]), "/ui/stream?instance=" + url.QueryEscape(hostile[0])}
	for _, n := range hostile {
		pages = append(pages, "/ui/instances/"+url.PathEscape(n))
	}
	for _, p := range pages {
		a := getStreamOrPage(t, srv, p)
		for _, h := range []string{"<script>window", "<img src=x", `"><img`} {
			if strings.Contains(a, h) {
				t.Errorf("%s: %q unescaped", p, h)
			}
		}
		if !strings.Contains(a, "&lt;script&gt;window.pwned=1&lt;/script&gt;") {
			t.Errorf("%s: the hostile text is not shown escaped:\n%s", p, a)
		}
	}
}

// getStreamOrPage reads a page, or a stream's first event.
func getStreamOrPage(t *testing.T, srv *httptest.Server, p string) string {
	t.Helper()
	if !strings.HasPrefix(p, "/ui/stream") {
		a := get(t, srv.Client(), srv.URL+p, "Authorization", "Bearer "+token)
		if a.status != http.StatusOK {
			t.Fatalf("%s: %d", p, a.status)
		}
		return a.body
	}
	ev, stop := streamEvents(t, srv, p)
	defer stop()
	return <-ev
}

// streamEvents follows a stream, one string per render event (its data
// lines joined as a browser joins them).
func streamEvents(t *testing.T, srv *httptest.Server, p string) (<-chan string, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+p, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := srv.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		t.Fatalf("%s: %d %s", p, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan string, 16)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 16<<20)
		var data []string
		for sc.Scan() {
			switch line := sc.Text(); {
			case strings.HasPrefix(line, "data: "):
				data = append(data, strings.TrimPrefix(line, "data: "))
			case line == "" && data != nil:
				out <- strings.Join(data, "\n")
				data = nil
			}
		}
	}()
	return out, cancel
}

// TestStreamFollowsTracker: a live page's stream renders at once, and
// again when a boot changes.
func TestStreamFollowsTracker(t *testing.T) {
	f := showcase(t)
	srv := httptest.NewServer(f.ui(webui.Options{}))
	t.Cleanup(srv.Close)
	ev, stop := streamEvents(t, srv, "/ui/stream?name=db-02")
	defer stop()
	first := <-ev
	if !strings.Contains(first, `data-name="db-02" data-state="pending"`) || strings.Contains(first, `data-name="web-01"`) {
		t.Fatalf("first render:\n%s", first)
	}
	f.fetch("db-02", "cloud-init", 1)
	for got := range ev {
		if strings.Contains(got, `data-name="db-02" data-state="fetched"`) {
			return
		}
	}
	t.Fatal("the stream ended without showing db-02 fetched")
}

// TestFleetQuery: counts per state whatever the state filter, the
// filter's rows, sorting both ways, pages, and a bad filter named.
func TestFleetQuery(t *testing.T) {
	f := bigFleet(t, 50)
	srv := httptest.NewServer(f.ui(webui.Options{PageSize: 7}))
	t.Cleanup(srv.Close)
	page := func(q string) (answer, []string) {
		a := get(t, srv.Client(), srv.URL+"/ui/?"+q, "Authorization", "Bearer "+token)
		var rows []string
		for _, m := range regexp.MustCompile(`<tr data-name="([^"]+)" data-state="([^"]+)"`).FindAllStringSubmatch(a.body, -1) {
			rows = append(rows, m[1]+":"+m[2])
		}
		return a, rows
	}
	a, rows := page("state=failed")
	for _, st := range firstboot.States {
		want := map[firstboot.State]string{firstboot.Pending: "10", firstboot.Fetched: "10", firstboot.Running: "10",
			firstboot.Done: "10", firstboot.Failed: "10", firstboot.Stalled: "0"}[st]
		if !strings.Contains(a.body, `data-state="`+string(st)+`"><span class="n">`+want+`</span>`) {
			t.Errorf("count of %s is not %s", st, want)
		}
	}
	if len(rows) != 7 || rows[0] != "vm-0005:failed" || !strings.Contains(a.body, "1–7 of 10 · page 1 of 2") {
		t.Errorf("state=failed: %v", rows)
	}
	if _, rows := page("state=failed&page=2"); len(rows) != 3 || rows[2] != "vm-0050:failed" {
		t.Errorf("state=failed page 2: %v", rows)
	}
	if _, rows := page("state=done&state=running&name=vm-001&sort=-state"); strings.Join(rows, " ") !=
		"vm-0014:done vm-0019:done vm-0013:running vm-0018:running" {
		t.Errorf("done or running, vm-001*, by state descending: %v", rows)
	}
	if a, _ := page("state=bogus&agent=windows"); a.status != http.StatusBadRequest ||
		!strings.Contains(a.body, `state=&#34;bogus&#34;`) || !strings.Contains(a.body, `agent=&#34;windows&#34;`) {
		t.Errorf("a bad filter: %d\n%s", a.status, a.body)
	}
	// As the docs say: a sort or a page that does not parse is a 400
	// naming it, not the default in silence.
	for q, want := range map[string]string{
		"sort=bogus": `sort=&#34;bogus&#34;`, "sort=-": `sort=&#34;-&#34;`,
		"page=-1": `page=&#34;-1&#34;`, "page=0": `page=&#34;0&#34;`, "page=two": `page=&#34;two&#34;`,
	} {
		if a, _ := page(q); a.status != http.StatusBadRequest || !strings.Contains(a.body, want) {
			t.Errorf("%s: %d, want a 400 naming %s", q, a.status, want)
		}
	}
}

// TestInstancePage: the timeline, the fetches and the errors of a failed
// boot; an unknown instance is a 404.
func TestInstancePage(t *testing.T) {
	f := showcase(t)
	srv := httptest.NewServer(f.ui(webui.Options{}))
	t.Cleanup(srv.Close)
	a := get(t, srv.Client(), srv.URL+"/ui/instances/db-01", "Authorization", "Bearer "+token)
	for _, want := range []string{
		`id="state">failed`,
		`<td>modules-final/config-scripts-user</td><td class="message fail">Failed to run module scripts-user: runcmd:`,
		`<tr data-stage="init-network"><td>init-network</td><td class="num">&#43;2s</td><td class="num">3s</td><td>SUCCESS</td>`,
		`<tr data-stage="modules-final">`,
		`<td>fetch</td><td>/nocloud/user-data</td><td></td><td class="num"></td><td>nocloud</td><td class="num">6</td>`,
		// A module's start and finish, one entry: how long it took.
		`<td>finish</td><td>modules-final/config-scripts-user</td><td>FAIL</td><td class="num">1s</td>`,
	} {
		if !strings.Contains(a.body, want) {
			t.Errorf("%q not on the page:\n%s", want, a.body)
		}
	}
	if a := get(t, srv.Client(), srv.URL+"/ui/instances/nobody", "Authorization", "Bearer "+token); a.status != http.StatusNotFound {
		t.Errorf("unknown instance: %d", a.status)
	}
}

// TestUnreportedInstance: a Windows instance (cloudbase-init sends no
// first-boot report) silent for longer than StallAfter is fetched, not
// stalled, on the fleet page and its own, whose stage/module says why in
// the CLI's words; the agent filter offers and selects cloudbase-init.
func TestUnreportedInstance(t *testing.T) {
	f := newFleet(t, []instance{{name: "web", agent: "cloud-init"}, {name: "win", agent: "cloudbase-init"}})
	f.fetch("web", "cloud-init", 3)
	f.boots.Fetch("win", uid("win"), "cloudbase-init", "openstack", "/openstack/latest/meta_data.json")
	f.clock.Advance(stallAfter + time.Minute)
	srv := httptest.NewServer(f.ui(webui.Options{}))
	t.Cleanup(srv.Close)
	const why = "cloudbase-init sends no first-boot report"
	a := get(t, srv.Client(), srv.URL+"/ui/", "Authorization", "Bearer "+token)
	for _, want := range []string{
		`<tr data-name="win" data-state="fetched">`, `<td>` + why + `</td>`,
		`<tr data-name="web" data-state="stalled">`, `<option value="cloudbase-init">cloudbase-init</option>`,
	} {
		if !strings.Contains(a.body, want) {
			t.Errorf("%q not on the fleet page:\n%s", want, a.body)
		}
	}
	a = get(t, srv.Client(), srv.URL+"/ui/?agent=cloudbase-init", "Authorization", "Bearer "+token)
	if a.status != http.StatusOK || !strings.Contains(a.body, `data-name="win"`) || strings.Contains(a.body, `data-name="web"`) {
		t.Errorf("agent=cloudbase-init: %d\n%s", a.status, a.body)
	}
	a = get(t, srv.Client(), srv.URL+"/ui/instances/win", "Authorization", "Bearer "+token)
	for _, want := range []string{`id="state">fetched`, `<dt>Stage/module</dt><dd>` + why + `</dd>`} {
		if !strings.Contains(a.body, want) {
			t.Errorf("%q not on the instance page:\n%s", want, a.body)
		}
	}
}

// TestStreamOutlivesServerTimeouts: a live page's stream is not cut by
// the listener's read and write timeouts (the admin listener's are 30 s
// and 60 s; here a tenth of a second): it lifts the read deadline, and
// gives each write a deadline of its own.
func TestStreamOutlivesServerTimeouts(t *testing.T) {
	f := showcase(t)
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = httpserver.New(f.ui(webui.Options{}), 100*time.Millisecond, 100*time.Millisecond)
	srv.Start()
	t.Cleanup(srv.Close)
	ev, stop := streamEvents(t, srv, "/ui/stream?name=db-02")
	defer stop()
	<-ev
	time.Sleep(400 * time.Millisecond) // past both timeouts: what they would cut is cut by now
	f.fetch("db-02", "cloud-init", 1)
	for got := range ev {
		if strings.Contains(got, `data-name="db-02" data-state="fetched"`) {
			return
		}
	}
	t.Fatal("the stream was cut by the server's timeouts")
}

// TestUnauthenticatedBodyNotAwaited: a request without a session that
// announces a body it never sends is answered at once, and its
// connection closed (the admin API's TestUnauthenticatedBodiesRefusedAtOnce,
// for the page's paths).
func TestUnauthenticatedBodyNotAwaited(t *testing.T) {
	srv := adminServer(t, showcase(t), token, false)
	for _, p := range []string{"/ui/logout", "/ui/instances/db-01"} {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100000\r\n\r\n", p)
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: no answer without the body: %v", p, err)
		}
		io.Copy(io.Discard, res.Body)
		if _, err := br.ReadByte(); res.StatusCode != http.StatusUnauthorized || err != io.EOF {
			t.Errorf("%s: answered %d; the connection then: %v (want it closed)", p, res.StatusCode, err)
		}
		c.Close()
	}
}

// TestStreamsBounded: past Options.MaxStreams, a live page is told to
// come back later (an empty stream with a retry time: an error status
// would make the browser give up for good), and gets its place once one
// is free.
func TestStreamsBounded(t *testing.T) {
	srv := httptest.NewServer(showcase(t).ui(webui.Options{MaxStreams: 1}))
	t.Cleanup(srv.Close)
	_, stop := streamEvents(t, srv, "/ui/stream")
	busy := get(t, srv.Client(), srv.URL+"/ui/stream", "Authorization", "Bearer "+token)
	if busy.status != http.StatusOK || busy.body != "retry: 30000\n\n" {
		t.Errorf("a stream past the bound: %d %q", busy.status, busy.body)
	}
	stop()
	for i := 0; ; i++ { // the first stream's slot is freed once its handler sees the client gone
		if i == 1000 {
			t.Fatal("the slot of a closed stream was never freed")
		}
		ev, stop := streamEvents(t, srv, "/ui/stream")
		got, ok := <-ev
		stop()
		if ok && strings.Contains(got, `id="fleet"`) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStreamRefreshSendsOnlyChanges: a refresh with nothing changed sends
// a comment, not the page's part again (which would replace it under the
// reader's selection or a click on its way).
func TestStreamRefreshSendsOnlyChanges(t *testing.T) {
	f := showcase(t)
	srv := httptest.NewServer(f.ui(webui.Options{Refresh: 10 * time.Millisecond}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/ui/stream", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	renders, unchanged := 0, 0
	for unchanged < 3 && sc.Scan() {
		switch sc.Text() {
		case "event: render":
			renders++
		case ": unchanged":
			unchanged++
		}
	}
	if unchanged < 3 || renders != 1 {
		t.Fatalf("%d renders and %d unchanged refreshes (%v): want the first render only", renders, unchanged, sc.Err())
	}
}
