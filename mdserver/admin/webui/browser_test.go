package webui_test

import (
	"bytes"
	"context"
	"flag"
	"image/png"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/mdserver/admin/webui"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// The page in a real browser: Debian's chromium, headless, driven over
// the DevTools protocol with chromedp. One browser for the whole test,
// each subtest in a browser context of its own (its own cookies), every
// wait bounded; the browser is killed when the test ends, however it ends.

var updateScreenshot = flag.Bool("update-screenshot", false, "rewrite docs/first-boot-status.png (and -instance.png) from the showcase fleet")

// browserTimeout bounds each subtest (a cold chromium on a busy machine
// takes seconds to start; nothing here needs a minute).
const browserTimeout = 90 * time.Second

// startBrowser starts chromium, its files and temporary files under the
// test's directory.
func startBrowser(t *testing.T) context.Context {
	path := testtools.Require(t, "chromium")
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir) // chromedp's profile directory, removed (and its leftover processes killed) at the end
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Env("HOME="+dir), chromedp.WindowSize(1280, 900))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(func() { bcancel(); acancel() })
	// The first Run starts the browser, and lives as long as its context:
	// no timeout on it (chromedp.Run), a timeout on every subtest's.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return bctx
}

// tab is a fresh browser context (no cookies) for one subtest.
func tab(t *testing.T, browser context.Context) context.Context {
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	ctx, tcancel := context.WithTimeout(ctx, browserTimeout)
	t.Cleanup(tcancel)
	return ctx
}

// serve serves the UI; its cleanup drops the live pages' streams first
// (Close waits for every request to end).
func serve(t *testing.T, ui *webui.UI) string {
	srv := httptest.NewServer(ui)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return srv.URL
}

func run(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// waitFor polls expr in the page until it is true.
func waitFor(t *testing.T, ctx context.Context, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr)); err != nil {
		t.Fatalf("waiting for %s: %v", expr, err)
	}
}

// clickLoad clicks what sel selects, and waits for the page it leads
// to to load.
func clickLoad[S chromedp.Selectable](sel S) chromedp.Action[chromedp.Void] {
	wait := chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(sel))
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := wait(ctx, t)
		return chromedp.Void{}, err
	}
}

// login logs in through the form and lands on the fleet.
func login(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	run(t, ctx, chromedp.Navigate(base+"/ui/login"), chromedp.SendKeys(chromedp.ID("token"), token),
		clickLoad(chromedp.ID("submit")), chromedp.WaitVisible(chromedp.ID("fleet")))
	// The stream's first render replaces the fleet's part of the page: a
	// click before it may land on a link it then removes.
	waitFor(t, ctx, `Number(document.body.dataset.renders) >= 1`)
}

const (
	rowsJS   = `document.querySelectorAll('#fleet tbody tr[data-name]').length`
	countsJS = `[...document.querySelectorAll('#counts a')].map(a => a.dataset.state + '=' + a.querySelector('.n').textContent).join(' ')`
)

func TestBrowser(t *testing.T) {
	browser := startBrowser(t)

	t.Run("login", func(t *testing.T) {
		base := serve(t, showcase(t).ui(webui.Options{}))
		ctx := tab(t, browser)
		run(t, ctx, chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.ID("token")))
		if loc := eval[string](t, ctx, `location.pathname`); loc != "/ui/login" {
			t.Fatalf("without a session /ui/ led to %s, want the login", loc)
		}
		run(t, ctx, chromedp.SendKeys(chromedp.ID("token"), "not-the-token"), clickLoad(chromedp.ID("submit")),
			chromedp.WaitVisible(chromedp.ID("problem")))
		if p := eval[string](t, ctx, `document.getElementById('problem').textContent`); p != "Wrong token." ||
			eval[int](t, ctx, `document.querySelectorAll('#fleet').length`) != 0 {
			t.Fatalf("a wrong token: %q", p)
		}
		login(t, ctx, base)
		if loc := eval[string](t, ctx, `location.pathname`); loc != "/ui/" {
			t.Fatalf("after the login: %s", loc)
		}
		if c := eval[string](t, ctx, `document.cookie`); c != "" {
			t.Errorf("a script reads the session cookie: %q", c)
		}
		run(t, ctx, clickLoad(chromedp.CSS("form.logout button")), chromedp.WaitVisible(chromedp.ID("token")))
		run(t, ctx, chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.ID("token")))
	})

	t.Run("fleet of 500", func(t *testing.T) {
		f := bigFleet(t, 500)
		base := serve(t, f.ui(webui.Options{}))
		ctx := tab(t, browser)
		login(t, ctx, base)
		if n := eval[int](t, ctx, rowsJS); n != 500 {
			t.Errorf("%d rows, want 500", n)
		}
		if c := eval[string](t, ctx, countsJS); c != "pending=100 fetched=100 running=100 stalled=0 done=100 failed=100 all=500" {
			t.Errorf("counts: %s", c)
		}
		// A count is a filter link.
		run(t, ctx, clickLoad(chromedp.CSS(`#counts a[data-state="failed"]`)), chromedp.WaitVisible(chromedp.CSS(`#counts a.active`)))
		if n, all := eval[int](t, ctx, rowsJS), eval[int](t, ctx, `document.querySelectorAll('#fleet tr[data-state="failed"]').length`); n != 100 || all != 100 {
			t.Errorf("failed: %d rows, %d failed", n, all)
		}
		// The filter form, by name.
		run(t, ctx, chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.ID("fleet")),
			chromedp.SendKeys(chromedp.CSS(`#filter input[name="name"]`), "vm-00"),
			clickLoad(chromedp.CSS(`#filter button[type="submit"]`)), chromedp.WaitVisible(chromedp.ID("fleet")))
		if q := eval[string](t, ctx, `location.search`); q != "?name=vm-00&agent=" {
			t.Errorf("the form's query: %s", q)
		}
		if n := eval[int](t, ctx, rowsJS); n != 99 {
			t.Errorf("name contains vm-00: %d rows, want 99", n)
		}

		// Live: an event through the tracker changes the row and the
		// counts, and the page is not reloaded.
		run(t, ctx, chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.ID("fleet")))
		eval[bool](t, ctx, `(window.sameDocument = true)`)
		if st := eval[string](t, ctx, `document.querySelector('tr[data-name="vm-0002"]').dataset.state`); st != "fetched" {
			t.Fatalf("vm-0002 is %s before the event", st)
		}
		f.event(t, "vm-0002", firstboot.KindFinish, "modules-final", firstboot.ResultSuccess, "")
		waitFor(t, ctx, `document.querySelector('tr[data-name="vm-0002"]').dataset.state === 'done'`)
		if !eval[bool](t, ctx, `window.sameDocument === true`) {
			t.Error("the page was reloaded")
		}
		if c := eval[string](t, ctx, countsJS); c != "pending=100 fetched=99 running=100 stalled=0 done=101 failed=100 all=500" {
			t.Errorf("counts after the event: %s", c)
		}
	})

	t.Run("instance", func(t *testing.T) {
		f := showcase(t)
		base := serve(t, f.ui(webui.Options{}))
		ctx := tab(t, browser)
		login(t, ctx, base)
		run(t, ctx, clickLoad(chromedp.CSS(`tr[data-name="db-01"] a`)), chromedp.WaitVisible(chromedp.ID("stages")))
		if s := eval[string](t, ctx, `[...document.querySelectorAll('#stages tbody tr')].map(r => r.dataset.stage + ':' + r.querySelector('rect:not(.axis)').getAttribute('class')).join(' ')`); s !=
			"init-network:success modules-config:success modules-final:fail" {
			t.Errorf("stages: %s", s)
		}
		if e := eval[string](t, ctx, `document.getElementById('errors').innerText`); !strings.Contains(e, "modules-final/config-scripts-user") ||
			!strings.Contains(e, "pg_ctlcluster: command not found") {
			t.Errorf("errors: %s", e)
		}
		if fe := eval[string](t, ctx, `[...document.querySelector('#events tr[data-kind="fetch"]').cells].map(c => c.textContent).slice(2).join('|')`); fe !=
			"fetch|/nocloud/user-data|||nocloud|6|" {
			t.Errorf("the fetch event: %s", fe)
		}
		if st := eval[string](t, ctx, `document.getElementById('state').textContent`); st != "failed" {
			t.Errorf("state %s", st)
		}
	})

	t.Run("hostile text", func(t *testing.T) {
		f := hostileFleet(t)
		base := serve(t, f.ui(webui.Options{}))
		ctx := tab(t, browser)
		login(t, ctx, base)
		pages := []string{base + "/ui/"}
		for _, n := range hostile {
			pages = append(pages, base+"/ui/instances/"+url.PathEscape(n))
		}
		for _, p := range pages {
			run(t, ctx, chromedp.Navigate(p), chromedp.WaitReady(chromedp.CSS("#live")))
			// A live render carrying markup too, once the stream's first
			// render is in.
			waitFor(t, ctx, `Number(document.body.dataset.renders) >= 1`)
			f.event(t, hostile[0], firstboot.KindFinish, "modules-final/"+hostile[1], firstboot.ResultFail, hostile[1])
			waitFor(t, ctx, `Number(document.body.dataset.renders) >= 2`)
			if pwned := eval[bool](t, ctx, `window.pwned !== undefined || document.querySelectorAll('#live img, #live script').length > 0`); pwned {
				t.Errorf("%s: hostile markup ran or became elements", p)
			}
			if !eval[bool](t, ctx, `document.getElementById('live').textContent.includes('<script>window.pwned=1</script>')`) {
				t.Errorf("%s: the hostile text is not shown as text", p)
			}
		}
	})

	t.Run("screenshot", func(t *testing.T) {
		f := showcase(t)
		base := serve(t, f.ui(webui.Options{}))
		ctx := tab(t, browser)
		login(t, ctx, base)
		shoot(t, ctx, base+"/ui/", "first-boot-status.png", `#fleet`)
		shoot(t, ctx, base+"/ui/instances/db-01", "first-boot-status-instance.png", `#events`)
	})
}

// shoot takes a screenshot of the page at u, and writes it under docs/
// with -update-screenshot.
func shoot(t *testing.T, ctx context.Context, u, name, ready string) {
	t.Helper()
	run(t, ctx, chromedp.EmulateViewport(1200, 700), chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS(ready)),
		chromedp.Poll[chromedp.Void](`Number(document.body.dataset.renders) >= 1`))
	b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil || img.Bounds().Dx() != 1200 || img.Bounds().Dy() < 400 {
		t.Fatalf("screenshot of %s: %v, %v", u, err, img.Bounds())
	}
	if *updateScreenshot {
		if err := os.WriteFile(filepath.Join("..", "..", "..", "docs", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
