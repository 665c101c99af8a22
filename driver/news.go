package driver

import (
	"fmt"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/observe/jobview"
)

// executorNews is what heartbeats and exit reports carry besides
// progress: the training process's usage, the values it reported and,
// from executors whose output does not reach this terminal otherwise,
// its output lines.
type executorNews struct {
	executor string
	rank     int
	usage    *driverpb.Usage
	reports  []*driverpb.Report
	output   []*driverpb.OutputLine
	dropped  int64
	spans    []*driverpb.Span
	models   []*driverpb.ModelSaved
}

// heartbeatNews reads the news in a heartbeat.
func heartbeatNews(r *driverpb.HeartbeatRequest) executorNews {
	return executorNews{executor: r.GetExecutorId(), rank: int(r.GetRank()), usage: r.GetUsage(), reports: r.GetReports(),
		output: r.GetOutput(), dropped: r.GetOutputDropped(), spans: r.GetSpans(), models: r.GetModels()}
}

// exitNews reads the news in an exit report.
func exitNews(r *driverpb.ExitReport) executorNews {
	return executorNews{executor: r.GetExecutorId(), rank: int(r.GetRank()), usage: r.GetUsage(), reports: r.GetReports(),
		output: r.GetOutput(), dropped: r.GetOutputDropped(), spans: r.GetSpans(), models: r.GetModels()}
}

// news takes an executor's news into the job: output lines onto the
// console (and from there the rank's log page), reports and usage into
// the job's model, event log and metrics.
func (o *observer) news(n executorNews) {
	if o == nil {
		return
	}
	for _, l := range n.output {
		o.printLine(l.GetStderr(), l.GetText())
	}
	if n.dropped > 0 {
		o.printLine(true, fmt.Sprintf("[rank %d] (%d lines of output not forwarded: the driver fell behind; executor %s keeps them in its log)",
			n.rank, n.dropped, n.executor))
	}
	if n.rank = o.current(n.rank); n.rank < 0 {
		return // a process the job went on without
	}
	if len(n.spans) > 0 {
		o.mu.Lock()
		role := o.roles[n.rank]
		o.mu.Unlock()
		o.trace.add(n.rank, role, n.spans)
		for _, s := range n.spans {
			o.metrics.ObserveSpan(s.GetCat(), float64(s.GetDurationMicros())/1e6)
		}
	}
	for _, r := range n.reports {
		at := time.UnixMilli(r.GetUnixMillis())
		if r.GetUnixMillis() == 0 {
			at = time.Now()
		}
		o.record(jobview.Event{Time: at, Kind: jobview.KindScalars, Rank: n.rank, Step: r.GetStep(), Values: r.GetValues()})
	}
	for _, m := range n.models {
		o.record(jobview.Event{Time: time.UnixMilli(m.GetUnixMillis()), Kind: jobview.KindModelSaved, Rank: n.rank,
			Model: &jobview.ModelRef{Name: m.GetName(), Version: m.GetVersion(), URI: m.GetUri()}})
	}
	if n.usage != nil || len(n.reports) > 0 {
		o.mu.Lock()
		u := o.usage[n.rank]
		if n.usage != nil {
			u.cpuSeconds, u.memoryBytes = n.usage.GetCpuSeconds(), n.usage.GetMemoryBytes()
			u.gpus, u.gpuUtil, u.gpuMemoryBytes = int(n.usage.GetGpus()), n.usage.GetGpuUtilizationRatio(), n.usage.GetGpuMemoryBytes()
		}
		for _, r := range n.reports {
			u.steps = max(u.steps, r.GetStep())
		}
		o.usage[n.rank] = u
		o.mu.Unlock()
	}
}

// printLine prints a forwarded output line as a local executor's line is
// printed, or records it when there is no console.
func (o *observer) printLine(toErr bool, line string) {
	if o.console != nil {
		o.console.Output(toErr, line)
	} else {
		o.outputLine(toErr, line)
	}
}

// rankUsage is the latest usage and step a rank reported.
type rankUsage struct {
	cpuSeconds  float64
	memoryBytes int64
	steps       int64
	// gpus is how many GPUs the sample covers (0: not known).
	gpus           int
	gpuUtil        float64
	gpuMemoryBytes int64
}

// outputReachesConsole reports whether cm brings executors' output to the
// console; other executors forward it in their heartbeats.
func outputReachesConsole(cm ClusterManager) bool {
	d, ok := cm.(OutputDeliverer)
	return ok && d.DeliversOutput()
}

// DeliversOutput says that local executors' output reaches the console
// through their pipes.
func (l *Local) DeliversOutput() bool { return true }
