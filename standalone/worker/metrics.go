package worker

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Collector returns the worker's Prometheus metrics, read at each scrape:
// its capacity, and its executors by state with how the ended ones
// exited.
func (w *Worker) Collector() prometheus.Collector { return workerCollector{w} }

type workerCollector struct{ w *Worker }

var (
	descCapacity = prometheus.NewDesc("spindle_worker_capacity", "Resources this worker offers.", []string{"resource"}, nil)
	descExecs    = prometheus.NewDesc("spindle_worker_executors", "Executors this worker runs or ran, by state.", []string{"state"}, nil)
	descExits    = prometheus.NewDesc("spindle_worker_executor_exits", "Ended executors this worker remembers, by how they ended.", []string{"status"}, nil)
)

func (c workerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descCapacity
	ch <- descExecs
	ch <- descExits
}

func (c workerCollector) Collect(ch chan<- prometheus.Metric) {
	w := c.w
	ch <- prometheus.MustNewConstMetric(descCapacity, prometheus.GaugeValue, float64(w.cfg.Cores), "cores")
	ch <- prometheus.MustNewConstMetric(descCapacity, prometheus.GaugeValue, float64(w.cfg.MemoryMB)*(1<<20), "memory_bytes")
	ch <- prometheus.MustNewConstMetric(descCapacity, prometheus.GaugeValue, float64(w.cfg.GPUs), "gpus")
	states := map[string]float64{"running": 0, "exited": 0}
	exits := map[string]float64{"success": 0, "failure": 0}
	w.mu.Lock()
	for _, p := range w.procs {
		if !p.exited {
			states["running"]++
			continue
		}
		states["exited"]++
		if p.exitCode == 0 {
			exits["success"]++
		} else {
			exits["failure"]++
		}
	}
	w.mu.Unlock()
	for s, n := range states {
		ch <- prometheus.MustNewConstMetric(descExecs, prometheus.GaugeValue, n, s)
	}
	for s, n := range exits {
		ch <- prometheus.MustNewConstMetric(descExits, prometheus.GaugeValue, n, s)
	}
}
