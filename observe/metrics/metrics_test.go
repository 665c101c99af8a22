package metrics

import (
	"io"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/spindle-ml/spindle/observe/jobview"
)

func TestDriverMetricsFollowTheJob(t *testing.T) {
	reg := NewRegistry()
	d := NewDriver(reg)
	t0 := time.Unix(1_800_000_000, 0)
	d.Observe(jobview.Event{Time: t0, Kind: jobview.KindJobState, State: jobview.StateRunning})
	for r := 0; r < 3; r++ {
		role := "worker"
		if r == 2 {
			role = "ps"
		}
		d.Observe(jobview.Event{Time: t0, Kind: jobview.KindExecutor, Rank: r, Role: role, State: jobview.RankRunning})
	}
	d.Observe(jobview.Event{Time: t0, Kind: jobview.KindProgress, Rank: 0, Progress: &jobview.Progress{Rows: 100, Bytes: 400, Batches: 1, Steps: 1}})
	d.Observe(jobview.Event{Time: t0.Add(time.Second), Kind: jobview.KindProgress, Rank: 0, Progress: &jobview.Progress{Rows: 600, Bytes: 2400, Batches: 6, Steps: 11}})
	// A rank restarted from zero does not count its rows twice.
	d.Observe(jobview.Event{Time: t0.Add(2 * time.Second), Kind: jobview.KindProgress, Rank: 0, Progress: &jobview.Progress{Rows: 50}})
	d.Observe(jobview.Event{Time: t0.Add(3 * time.Second), Kind: jobview.KindExecutor, Rank: 1, State: jobview.RankFailed})
	d.Observe(jobview.Event{Time: t0.Add(3 * time.Second), Kind: jobview.KindRestart, Reason: "rank 1 exited 3 because of a long free text"})
	d.Observe(jobview.Event{Time: t0.Add(4 * time.Second), Kind: jobview.KindReplace, Rank: 1, Reason: "rank 1 was killed by signal SIGKILL"})

	srv := httptest.NewServer(Handler(reg))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("/metrics is not Prometheus text: %v", err)
	}

	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		f := families[name]
		if f == nil {
			t.Fatalf("%s missing", name)
		}
	next:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue next
				}
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
		t.Fatalf("%s has no series %v", name, labels)
		return 0
	}
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"spindle_feed_rows_total", map[string]string{"role": "worker"}, 600},
		{"spindle_feed_bytes_total", map[string]string{"role": "worker"}, 2400},
		{"spindle_feed_batches_total", map[string]string{"role": "worker"}, 6},
		{"spindle_step_duration_seconds", map[string]string{"role": "worker"}, 10},
		{"spindle_executors", map[string]string{"role": "worker", "state": "running"}, 1},
		{"spindle_executors", map[string]string{"role": "worker", "state": "failed"}, 1},
		{"spindle_executors", map[string]string{"role": "ps", "state": "running"}, 1},
		{"spindle_executor_exits_total", map[string]string{"state": "failed"}, 1},
		{"spindle_restarts_total", map[string]string{"reason": "other"}, 1},
		{"spindle_restarts_total", map[string]string{"reason": "replaced"}, 1},
		{"spindle_job_state", map[string]string{"state": "RUNNING"}, 1},
		{"spindle_job_state", map[string]string{"state": "FAILED"}, 0},
	}
	for _, c := range checks {
		if got := value(c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	checkConventions(t, families)
}

// checkConventions holds Spindle's metric names to Prometheus's naming
// rules: a spindle_ prefix (runtime collectors aside), _total on counters
// and only there, base units, and a help text on each.
func checkConventions(t *testing.T, families map[string]*dto.MetricFamily) {
	t.Helper()
	for name, f := range families {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "promhttp_") {
			continue
		}
		if !strings.HasPrefix(name, "spindle_") {
			t.Errorf("%s: no spindle_ prefix", name)
		}
		isCounter := f.GetType() == dto.MetricType_COUNTER
		if isCounter != strings.HasSuffix(name, "_total") {
			t.Errorf("%s (%s): _total goes on counters and only on them", name, f.GetType())
		}
		for _, bad := range []string{"_ms", "_milliseconds", "_kb", "_mb", "_percent"} {
			if strings.Contains(name, bad) {
				t.Errorf("%s: not in base units", name)
			}
		}
		if f.GetHelp() == "" {
			t.Errorf("%s: no help text", name)
		}
	}
}

func TestRestartReasonAndExitStatusLabelsStayBounded(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range []string{"failure", "preempted", "x", "y", "anything at all"} {
		seen[restartReason(r)] = true
	}
	if len(seen) != 3 {
		t.Errorf("restart reasons %v", seen)
	}
	seen = map[string]bool{}
	for code := -20; code < 300; code++ {
		seen[ExitStatus(code)] = true
	}
	if len(seen) != 7 {
		t.Errorf("%d exit status label values: %v", len(seen), seen)
	}
}

// TestSpans: timeline spans become a histogram by kind, for the kinds
// there are; others are left out, so the label's values stay few.
func TestSpans(t *testing.T) {
	reg := NewRegistry()
	d := NewDriver(reg)
	d.ObserveSpan("collective", 0.002)
	d.ObserveSpan("collective", 0.004)
	d.ObserveSpan("feed", 0.1)
	d.ObserveSpan("made-up", 1)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, f := range fams {
		if f.GetName() != "spindle_span_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			counts[m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleCount()
		}
	}
	if counts["collective"] != 2 || counts["feed"] != 1 || len(counts) != 2 {
		t.Fatalf("span counts by kind: %v", counts)
	}
}

// A parameter server's reported totals become the spindle_ps_* metrics;
// its counters only grow, across a restart from zero too.
func TestParameterServerMetrics(t *testing.T) {
	reg := NewRegistry()
	d := NewDriver(reg)
	report := func(pushes, keys float64) {
		d.Observe(jobview.Event{Kind: jobview.KindScalars, Rank: 2, Values: map[string]float64{
			ScalarPSKeys: keys, ScalarPSBytes: keys * 60, ScalarPSPushes: pushes, ScalarPSPulls: pushes,
			ScalarPSPushKeys: pushes * 100, ScalarPSPullKeys: pushes * 50, ScalarPSPushSeconds: pushes / 1000, ScalarPSPullSeconds: pushes / 500}})
	}
	report(10, 1000)
	report(25, 1500)
	report(5, 200) // the server restarted
	report(8, 300)
	d.Observe(jobview.Event{Kind: jobview.KindScalars, Rank: 0, Values: map[string]float64{"loss": 0.3}})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			if !strings.HasPrefix(f.GetName(), "spindle_ps_") {
				continue
			}
			if m.GetLabel()[0].GetValue() != "2" {
				t.Fatalf("%s labelled %v, want rank 2", f.GetName(), m.GetLabel())
			}
			got[f.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"spindle_ps_keys": 300, "spindle_ps_bytes": 18000, "spindle_ps_pushes_total": 28, "spindle_ps_pulls_total": 28,
		"spindle_ps_pushed_keys_total": 2800, "spindle_ps_pulled_keys_total": 1400, "spindle_ps_push_seconds_total": 0.028, "spindle_ps_pull_seconds_total": 0.056}
	for name, v := range want {
		if math.Abs(got[name]-v) > 1e-9 {
			t.Errorf("%s = %v, want %v (all: %v)", name, got[name], v, got)
		}
	}
}

// TestRankGPUGauges: a rank's sampled GPU use becomes two gauges labelled
// with its role and rank; they go away when its use is no longer known,
// and a rank without GPUs has none.
func TestRankGPUGauges(t *testing.T) {
	reg := NewRegistry()
	d := NewDriver(reg)
	t0 := time.Unix(1_800_000_000, 0)
	d.Observe(jobview.Event{Time: t0, Kind: jobview.KindExecutor, Rank: 0, Role: "worker", State: jobview.RankRunning})
	d.Observe(jobview.Event{Time: t0, Kind: jobview.KindExecutor, Rank: 1, Role: "ps", State: jobview.RankRunning})
	d.Observe(jobview.Event{Time: t0, Kind: jobview.KindProgress, Rank: 0, Progress: &jobview.Progress{GPUs: 2, GPUUtilRatio: 0.5, GPUMemoryBytes: 3 << 30}})
	d.Observe(jobview.Event{Time: t0, Kind: jobview.KindProgress, Rank: 1, Progress: &jobview.Progress{Rows: 1}})
	d.Observe(jobview.Event{Time: t0.Add(time.Second), Kind: jobview.KindProgress, Rank: 0, Progress: &jobview.Progress{GPUs: 2, GPUUtilRatio: 0.75, GPUMemoryBytes: 4 << 30}})

	gpuSeries := func() map[string]float64 {
		t.Helper()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range fams {
			if !strings.HasPrefix(f.GetName(), "spindle_rank_gpu_") {
				continue
			}
			for _, m := range f.GetMetric() {
				key := f.GetName()
				for _, l := range m.GetLabel() {
					key += " " + l.GetName() + "=" + l.GetValue()
				}
				got[key] = m.GetGauge().GetValue()
			}
		}
		return got
	}
	got := gpuSeries()
	want := map[string]float64{
		"spindle_rank_gpu_utilization_ratio rank=0 role=worker": 0.75,
		"spindle_rank_gpu_memory_bytes rank=0 role=worker":      4 << 30,
	}
	if len(got) != len(want) {
		t.Fatalf("GPU series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	// The process ended: its exit report carries no GPU use.
	d.Observe(jobview.Event{Time: t0.Add(2 * time.Second), Kind: jobview.KindProgress, Rank: 0, Progress: &jobview.Progress{}})
	if got := gpuSeries(); len(got) != 0 {
		t.Errorf("GPU series after the rank's use went unknown: %v", got)
	}
}
