package webui_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// How promptly the page follows a change, against the CLI's
// `instances status --watch` (GET /v1/boots?watch=true): measured, not
// asserted (docs/benchmarks.md has the command and the numbers).
var measureLatency = flag.Int("measure-latency", 0, "measure N status writes: the page's latency against the admin API watch's (TestLiveLatency)")

// TestLiveLatency writes a boot's progress through the tracker (as a
// guest's post does) after a quiet spell each time (latencyIdle, less
// than the page's 15 s refresh), and measures when the admin API's watch
// delivers it and when the page in chromium shows it.
func TestLiveLatency(t *testing.T) {
	n := *measureLatency
	if n <= 0 {
		t.Skip("a measurement: -measure-latency=N")
	}
	const latencyIdle = 3 * time.Second
	browser := startBrowser(t)
	f := showcase(t)
	srv := adminServer(t, f, token, false)
	ctx := tab(t, browser)
	ctx, cancel := context.WithTimeout(ctx, time.Duration(n)*(latencyIdle+20*time.Second)+time.Minute)
	defer cancel()
	login(t, ctx, srv.URL)

	watched := watchArrivals(t, srv.URL)
	<-watched // the watch's first summary
	var page, watch []time.Duration
	for i := range n {
		time.Sleep(latencyIdle)
		module := fmt.Sprintf("config-step-%d", i)
		wrote := time.Now()
		f.event(t, "web-05", firstboot.KindStart, "modules-config/"+module, "", "")
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](
			`document.querySelector('tr[data-name="web-05"]').textContent.includes('`+module+`')`,
			chromedp.WithPollingInterval(5*time.Millisecond))); err != nil {
			t.Fatal(err)
		}
		page = append(page, time.Since(wrote))
		for at := range watched {
			if strings.Contains(at.data, module) {
				watch = append(watch, at.at.Sub(wrote))
				break
			}
		}
	}
	t.Logf("%d status writes, each after %s quiet: page median %s max %s; admin watch (the CLI's --watch) median %s max %s",
		n, latencyIdle, median(page), slices.Max(page), median(watch), slices.Max(watch))
}

type arrival struct {
	at   time.Time
	data string
}

// watchArrivals follows GET /v1/boots?watch=true, as the CLI's --watch
// does, and sends each event with the time it arrived.
func watchArrivals(t *testing.T, base string) <-chan arrival {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/boots?watch=true", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %v %v", err, resp)
	}
	out := make(chan arrival, 64)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				out <- arrival{time.Now(), d}
			}
		}
	}()
	return out
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond)
}
