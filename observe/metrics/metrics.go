package metrics

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/spindle-ml/spindle/observe/jobview"
)

// NewRegistry returns a registry holding the Go runtime's and the
// process's own collectors, for one daemon to fill and serve.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves reg in the Prometheus text format.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// Driver is a job driver's metrics. It is fed the same events as the job's
// model (Observe), so the numbers on /metrics and on the job page agree.
type Driver struct {
	executors *prometheus.GaugeVec
	rows      *prometheus.CounterVec
	bytes     *prometheus.CounterVec
	batches   *prometheus.CounterVec
	steps     *prometheus.HistogramVec
	exits     *prometheus.CounterVec
	restarts  *prometheus.CounterVec
	jobState  *prometheus.GaugeVec
	spans     *prometheus.HistogramVec
	psKeys    *prometheus.GaugeVec
	psBytes   *prometheus.GaugeVec
	psPushes  *prometheus.CounterVec
	psPulls   *prometheus.CounterVec
	psServed  map[string]*prometheus.CounterVec // by scalar name
	gpuUtil   *prometheus.GaugeVec
	gpuMemory *prometheus.GaugeVec

	mu    sync.Mutex
	ranks map[int]*rankMetrics
}

type rankMetrics struct {
	role  string
	state string
	last  jobview.Progress
	at    float64 // seconds, from the event time
	seen  bool
	// ps holds a parameter server's last reported totals.
	ps map[string]float64
	// gpuRole is the role label of the rank's GPU series, "" when it has
	// none.
	gpuRole string
}

// The scalars Spindle's parameter servers report (ps/server), which the
// driver turns into the spindle_ps_* metrics.
const (
	ScalarPSKeys   = "ps_keys"
	ScalarPSBytes  = "ps_bytes"
	ScalarPSPushes = "ps_pushes"
	ScalarPSPulls  = "ps_pulls"
	// The keys workers pushed and pulled, and the seconds the server
	// spent answering them.
	ScalarPSPushKeys    = "ps_push_keys"
	ScalarPSPullKeys    = "ps_pull_keys"
	ScalarPSPushSeconds = "ps_push_seconds"
	ScalarPSPullSeconds = "ps_pull_seconds"
)

// maxStepsObserved bounds how many step durations one progress report adds
// to the histogram, so a fast trainer's heartbeat stays cheap.
const maxStepsObserved = 256

// NewDriver registers a driver's metrics in reg.
func NewDriver(reg prometheus.Registerer) *Driver {
	d := &Driver{
		executors: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "spindle_executors",
			Help: "Executors of the job by role and state."}, []string{"role", "state"}),
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spindle_feed_rows_total",
			Help: "Rows the training processes took from the feed."}, []string{"role"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spindle_feed_bytes_total",
			Help: "Bytes the feed sent to training processes."}, []string{"role"}),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spindle_feed_batches_total",
			Help: "Batches the training processes took from the feed."}, []string{"role"}),
		steps: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "spindle_step_duration_seconds",
			Help:    "Duration of a training step, averaged over each progress report.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, []string{"role"}),
		exits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spindle_executor_exits_total",
			Help: "Executors that ended, by final state (finished, failed, stopped, lost)."}, []string{"state"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spindle_restarts_total",
			Help: "Restarts of the job's gang, by reason (replaced: one rank's lost process replaced alone)."}, []string{"reason"}),
		jobState: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "spindle_job_state",
			Help: "1 for the job's current state, 0 for the others."}, []string{"state"}),
		spans: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "spindle_span_duration_seconds",
			Help:    "Time training processes spent in collective operations, waiting for the feed and saving checkpoints (from the job's timeline; spindle.timeline).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 12)}, []string{"kind"}),
		psKeys: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "spindle_ps_keys",
			Help: "Rows a parameter server holds, all tables together (Spindle's own servers)."}, []string{"rank"}),
		psBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "spindle_ps_bytes",
			Help: "Memory a parameter server's rows take, weights and optimizer slots."}, []string{"rank"}),
		psPushes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spindle_ps_pushes_total",
			Help: "Pushes a parameter server applied."}, []string{"rank"}),
		psPulls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spindle_ps_pulls_total",
			Help: "Pulls a parameter server answered."}, []string{"rank"}),
		psServed: map[string]*prometheus.CounterVec{
			ScalarPSPushKeys: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spindle_ps_pushed_keys_total",
				Help: "Keys workers pushed to a parameter server."}, []string{"rank"}),
			ScalarPSPullKeys: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spindle_ps_pulled_keys_total",
				Help: "Keys workers pulled from a parameter server."}, []string{"rank"}),
			ScalarPSPushSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spindle_ps_push_seconds_total",
				Help: "Time a parameter server spent answering pushes (divided by spindle_ps_pushes_total: the mean push latency)."}, []string{"rank"}),
			ScalarPSPullSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spindle_ps_pull_seconds_total",
				Help: "Time a parameter server spent answering pulls, waits for slower workers' clocks included."}, []string{"rank"}),
		},
		gpuUtil: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "spindle_rank_gpu_utilization_ratio",
			Help: "Mean utilisation of a rank's GPUs, 0 to 1 (nvidia-smi on the rank's executor; only ranks given GPUs)."}, []string{"role", "rank"}),
		gpuMemory: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "spindle_rank_gpu_memory_bytes",
			Help: "Device memory in use on a rank's GPUs, by every process on them."}, []string{"role", "rank"}),
		ranks: map[int]*rankMetrics{},
	}
	reg.MustRegister(d.executors, d.rows, d.bytes, d.batches, d.steps, d.exits, d.restarts, d.jobState, d.spans,
		d.psKeys, d.psBytes, d.psPushes, d.psPulls, d.gpuUtil, d.gpuMemory)
	for _, c := range d.psServed {
		reg.MustRegister(c)
	}
	return d
}

// Observe folds one job event into the metrics.
func (d *Driver) Observe(ev jobview.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch ev.Kind {
	case jobview.KindJobState:
		for _, s := range []string{jobview.StateSubmitted, jobview.StateRunning, jobview.StateSucceeded, jobview.StateFailed, jobview.StateKilled} {
			v := 0.0
			if s == ev.State {
				v = 1
			}
			d.jobState.WithLabelValues(s).Set(v)
		}
	case jobview.KindRestart:
		d.restarts.WithLabelValues(restartReason(ev.Reason)).Inc()
	case jobview.KindReplace:
		d.restarts.WithLabelValues("replaced").Inc()
	case jobview.KindExecutor:
		r := d.rank(ev.Rank)
		if ev.Role != "" && ev.Role != r.role {
			if r.state != "" {
				d.executors.WithLabelValues(r.role, r.state).Dec()
				d.executors.WithLabelValues(ev.Role, r.state).Inc()
			}
			r.role = ev.Role
		}
		if ev.State != "" && ev.State != r.state {
			if r.state != "" {
				d.executors.WithLabelValues(r.role, r.state).Dec()
			}
			d.executors.WithLabelValues(r.role, ev.State).Inc()
			r.state = ev.State
			switch ev.State {
			case jobview.RankFinished, jobview.RankFailed, jobview.RankStopped, jobview.RankLost:
				d.exits.WithLabelValues(ev.State).Inc()
			}
		}
	case jobview.KindScalars:
		d.observePS(ev)
	case jobview.KindProgress:
		if ev.Progress == nil {
			return
		}
		r := d.rank(ev.Rank)
		p := *ev.Progress
		at := float64(ev.Time.UnixNano()) / 1e9
		if r.seen {
			// Counters only grow: a restarted rank that starts again from
			// zero adds nothing until it passes its old count.
			add := func(c *prometheus.CounterVec, now, before int64) {
				if now > before {
					c.WithLabelValues(r.role).Add(float64(now - before))
				}
			}
			add(d.rows, p.Rows, r.last.Rows)
			add(d.bytes, p.Bytes, r.last.Bytes)
			add(d.batches, p.Batches, r.last.Batches)
			if n := p.Steps - r.last.Steps; n > 0 && at > r.at {
				per := (at - r.at) / float64(n)
				for i := int64(0); i < min(n, maxStepsObserved); i++ {
					d.steps.WithLabelValues(r.role).Observe(per)
				}
			}
		} else {
			d.rows.WithLabelValues(r.role).Add(float64(p.Rows))
			d.bytes.WithLabelValues(r.role).Add(float64(p.Bytes))
			d.batches.WithLabelValues(r.role).Add(float64(p.Batches))
		}
		r.last, r.at, r.seen = maxProgress(r.last, p), at, true
		d.observeGPU(ev.Rank, r, p)
	}
}

// observeGPU sets a rank's GPU gauges from its progress, or removes them
// when its GPU use is no longer known (its process ended, or nvidia-smi
// stopped answering). d.mu is held.
func (d *Driver) observeGPU(rank int, r *rankMetrics, p jobview.Progress) {
	label := strconv.Itoa(rank)
	if r.gpuRole != "" && (p.GPUs == 0 || r.gpuRole != r.role) {
		d.gpuUtil.DeleteLabelValues(r.gpuRole, label)
		d.gpuMemory.DeleteLabelValues(r.gpuRole, label)
		r.gpuRole = ""
	}
	if p.GPUs > 0 {
		d.gpuUtil.WithLabelValues(r.role, label).Set(p.GPUUtilRatio)
		d.gpuMemory.WithLabelValues(r.role, label).Set(float64(p.GPUMemoryBytes))
		r.gpuRole = r.role
	}
}

// observePS folds a parameter server's reported totals into the
// spindle_ps_* metrics. d.mu is held.
func (d *Driver) observePS(ev jobview.Event) {
	if _, ok := ev.Values[ScalarPSKeys]; !ok {
		return
	}
	r := d.rank(ev.Rank)
	label := strconv.Itoa(ev.Rank)
	d.psKeys.WithLabelValues(label).Set(ev.Values[ScalarPSKeys])
	d.psBytes.WithLabelValues(label).Set(ev.Values[ScalarPSBytes])
	if r.ps == nil {
		r.ps = map[string]float64{}
	}
	counters := map[string]*prometheus.CounterVec{ScalarPSPushes: d.psPushes, ScalarPSPulls: d.psPulls}
	for name, c := range d.psServed {
		counters[name] = c
	}
	for name, c := range counters {
		if _, ok := ev.Values[name]; !ok {
			continue // a server of an older Spindle
		}
		// Totals only grow; a restarted server starts again from zero.
		if v := ev.Values[name]; v > r.ps[name] {
			c.WithLabelValues(label).Add(v - r.ps[name])
			r.ps[name] = v
		} else if v < r.ps[name] {
			r.ps[name] = v
		}
	}
}

func (d *Driver) rank(n int) *rankMetrics {
	r := d.ranks[n]
	if r == nil {
		r = &rankMetrics{role: "worker"}
		d.ranks[n] = r
	}
	return r
}

// maxProgress keeps the larger of each counter, so a rank restarted from
// zero is not counted twice.
func maxProgress(a, b jobview.Progress) jobview.Progress {
	b.Rows, b.Bytes, b.Batches, b.Steps = max(a.Rows, b.Rows), max(a.Bytes, b.Bytes), max(a.Batches, b.Batches), max(a.Steps, b.Steps)
	return b
}

// restartReasons are the values the restarts counter's reason label takes;
// anything else is "other", so a free-text reason cannot blow up the
// label's cardinality.
var restartReasons = map[string]bool{"failure": true, "preempted": true, "node_lost": true, "resize": true, "manual": true, "replaced": true}

func restartReason(r string) string {
	if restartReasons[r] {
		return r
	}
	return "other"
}

// ExitStatus is a label value for a process exit status, bounded to the
// statuses that mean something distinct.
func ExitStatus(code int) string {
	switch {
	case code >= 0 && code <= 2, code == 137, code == 143:
		return strconv.Itoa(code)
	case code < 0:
		return "signal"
	}
	return "other"
}

// ObserveSpan adds one timeline span (kind collective, feed or checkpoint)
// of duration seconds. Other kinds are left out, keeping the label's
// values few.
func (d *Driver) ObserveSpan(kind string, seconds float64) {
	switch kind {
	case "collective", "feed", "checkpoint":
		d.spans.WithLabelValues(kind).Observe(seconds)
	}
}
