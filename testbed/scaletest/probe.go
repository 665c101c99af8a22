package scaletest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/observe/jobview"
	"github.com/spindle-ml/spindle/observe/webui"
)

// probe times one GET of url, its whole body read.
func probe(ctx context.Context, url string) (Probe, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Probe{}, err
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Probe{}, fmt.Errorf("scaletest: GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return Probe{}, fmt.Errorf("scaletest: read %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Probe{}, fmt.Errorf("scaletest: GET %s: %s", url, resp.Status)
	}
	return Probe{Bytes: int(n), Time: time.Since(start)}, nil
}

// probeHistory serves the event log directory as spindle history does and
// times its job list and the job's page data.
func probeHistory(ctx context.Context, dir, jobID string) (list, job Probe, err error) {
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	srv := httptest.NewServer(webui.Handler(webui.NewHistory(res, dir), nil))
	defer srv.Close()
	if list, err = probe(ctx, srv.URL+"/api/jobs"); err != nil {
		return list, job, err
	}
	job, err = probe(ctx, srv.URL+"/api/jobs/"+jobID)
	return list, job, err
}

// renderTime is the job page's time in headless Chromium, from the browser
// asking for it to the page counting every rank and showing the first page
// of them. The harness serves the driver's UI through a proxy beside a
// page of its own, which loads the job page in a same-origin frame,
// watches it, and calls back when it shows the ranks; the proxy times the
// two requests on its own clock (the browser's clocks run virtual time).
func renderTime(ctx context.Context, chromium, base, jobID string, ranks int) (time.Duration, error) {
	target, err := url.Parse(base)
	if err != nil {
		return 0, fmt.Errorf("scaletest: web UI address %q: %w", base, err)
	}
	var mu sync.Mutex
	var asked, done time.Time
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		// The UI forbids framing; the harness's frame is its own origin.
		if csp := r.Header.Get("Content-Security-Policy"); csp != "" {
			r.Header.Set("Content-Security-Policy", strings.ReplaceAll(csp, "frame-ancestors 'none'", "frame-ancestors 'self'"))
		}
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("/", proxy)
	mux.HandleFunc("GET /jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = time.Now()
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	})
	mux.HandleFunc("GET /scale-probe", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, renderProbePage, "/jobs/"+url.PathEscape(jobID), ranks, jobview.RanksPageSize)
	})
	mux.HandleFunc("GET /scale-probe/done", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		done = time.Now()
		mu.Unlock()
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	profile, err := os.MkdirTemp("", "scaletest-chromium-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(profile)
	args := []string{"--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=" + profile,
		"--window-size=1280,900", "--virtual-time-budget=30000", "--dump-dom", srv.URL + "/scale-probe"}
	if out, err := exec.CommandContext(ctx, chromium, args...).Output(); err != nil {
		return 0, fmt.Errorf("scaletest: %s --dump-dom: %w (%.200s)", chromium, err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if done.IsZero() || asked.IsZero() {
		return 0, fmt.Errorf("scaletest: the job page did not show %d ranks in %s", ranks, chromium)
	}
	return done.Sub(asked), nil
}

// renderProbePage loads the job page (%s) in a frame and calls back once
// it counts every rank (%d) and its ranks table shows its first page (%d
// rows at most).
const renderProbePage = `<!doctype html><html><body><pre id="result">waiting</pre>
<iframe id="page" style="width:1280px;height:900px"></iframe>
<script>
const ranks = %[2]d, want = Math.min(ranks, %[3]d), frame = document.getElementById("page");
frame.src = %[1]q;
const poll = setInterval(async () => {
  const doc = frame.contentDocument;
  const rows = doc ? doc.querySelectorAll("tr.rank").length : 0;
  const counted = doc && doc.getElementById("rank-states");
  if (rows >= want && counted && counted.textContent.startsWith(ranks + " ranks")) {
    clearInterval(poll);
    await fetch("/scale-probe/done");
    document.getElementById("result").textContent = "rendered";
  }
}, 5);
</script></body></html>`

// residentBytes is this process's resident set size.
func residentBytes() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
