package master

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

// Collector returns the master's Prometheus metrics, read from its
// replicated state and Raft at each scrape: whether it leads, the leader
// changes it saw, workers, applications and executors by state, queued
// gangs and the cluster's capacity and use.
func (m *Master) Collector() prometheus.Collector { return masterCollector{m} }

type masterCollector struct{ m *Master }

var (
	descLeader   = prometheus.NewDesc("spindle_master_is_leader", "1 when this master leads the Raft group.", nil, nil)
	descTerms    = prometheus.NewDesc("spindle_master_leader_terms_total", "Terms this master has led since it started.", nil, nil)
	descRaftTerm = prometheus.NewDesc("spindle_master_raft_term", "The Raft term this master is in.", nil, nil)
	descWorkers  = prometheus.NewDesc("spindle_workers", "Registered workers by state.", []string{"state"}, nil)
	descApps     = prometheus.NewDesc("spindle_applications", "Applications the masters remember, by state.", []string{"state"}, nil)
	descExecs    = prometheus.NewDesc("spindle_executors", "Executors by state.", []string{"state"}, nil)
	descQueued   = prometheus.NewDesc("spindle_queued_gangs", "Gang requests waiting for room (on the leader).", nil, nil)
	descCapacity = prometheus.NewDesc("spindle_cluster_capacity", "Resources of the alive workers.", []string{"resource"}, nil)
	descUsed     = prometheus.NewDesc("spindle_cluster_used", "Resources the running executors hold.", []string{"resource"}, nil)
)

func (c masterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLeader, descTerms, descRaftTerm, descWorkers, descApps, descExecs, descQueued, descCapacity, descUsed} {
		ch <- d
	}
}

func (c masterCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	leader := 0.0
	queued := 0.0
	if ls := m.leader.Load(); ls != nil {
		leader = 1
		queued = float64(len(ls.sched.waiting()))
	}
	ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, leader)
	ch <- prometheus.MustNewConstMetric(descTerms, prometheus.CounterValue, float64(m.leaderTerms.Load()))
	ch <- prometheus.MustNewConstMetric(descRaftTerm, prometheus.GaugeValue, float64(m.raft.CurrentTerm()))
	ch <- prometheus.MustNewConstMetric(descQueued, prometheus.GaugeValue, queued)
	m.fsm.read(func(st *State, _ uint64) {
		workers := map[string]float64{"alive": 0, "lost": 0}
		var cores, mem, gpus float64
		for _, w := range st.Workers {
			if w.Alive {
				workers["alive"]++
				cores, mem, gpus = cores+float64(w.Cores), mem+float64(w.MemoryMB)*(1<<20), gpus+float64(w.GPUs)
			} else {
				workers["lost"]++
			}
		}
		for s, n := range workers {
			ch <- prometheus.MustNewConstMetric(descWorkers, prometheus.GaugeValue, n, s)
		}
		apps := map[string]float64{}
		for _, s := range []pb.AppState{pb.AppState_APP_STATE_RUNNING, pb.AppState_APP_STATE_FINISHED, pb.AppState_APP_STATE_KILLED, pb.AppState_APP_STATE_ABANDONED} {
			apps[strings.ToLower(strings.TrimPrefix(s.String(), "APP_STATE_"))] = 0
		}
		for _, a := range st.Apps {
			apps[strings.ToLower(strings.TrimPrefix(a.State.String(), "APP_STATE_"))]++
		}
		for s, n := range apps {
			ch <- prometheus.MustNewConstMetric(descApps, prometheus.GaugeValue, n, s)
		}
		execs := map[string]float64{"placed": 0, "running": 0, "exited": 0, "lost": 0}
		var usedCores, usedMem, usedGPUs float64
		for _, e := range st.Executors {
			execs[executorStateName(e.State)]++
			if e.Active() {
				usedCores, usedMem, usedGPUs = usedCores+float64(e.Cores), usedMem+float64(e.MemoryMB)*(1<<20), usedGPUs+float64(len(e.GPUs))
			}
		}
		for s, n := range execs {
			ch <- prometheus.MustNewConstMetric(descExecs, prometheus.GaugeValue, n, s)
		}
		for r, v := range map[string][2]float64{"cores": {cores, usedCores}, "memory_bytes": {mem, usedMem}, "gpus": {gpus, usedGPUs}} {
			ch <- prometheus.MustNewConstMetric(descCapacity, prometheus.GaugeValue, v[0], r)
			ch <- prometheus.MustNewConstMetric(descUsed, prometheus.GaugeValue, v[1], r)
		}
	})
}
