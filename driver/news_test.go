package driver

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/observe/jobview"
	"github.com/spindle-ml/spindle/observe/metrics"
)

// TestExecutorNews: forwarded output lines reach the console and the
// rank's log; reports and usage reach the job's model.
func TestExecutorNews(t *testing.T) {
	var out, errOut syncbuf.Buffer
	o := consoleObserver(&out, &errOut)
	o.record(jobview.Event{Kind: jobview.KindSubmitted, Info: &jobview.Info{ID: "job-1", WorldSize: 2}})

	o.news(heartbeatNews(&driverpb.HeartbeatRequest{ExecutorId: "exec-1", Rank: 1,
		Usage:         &driverpb.Usage{CpuSeconds: 2.5, MemoryBytes: 1 << 20, Gpus: 2, GpuUtilizationRatio: 0.6, GpuMemoryBytes: 5 << 30},
		Reports:       []*driverpb.Report{{Step: 3, Values: map[string]float64{"loss": 0.5}, UnixMillis: time.Now().UnixMilli()}},
		Output:        []*driverpb.OutputLine{{Text: "[rank 1] hello"}, {Stderr: true, Text: "[rank 1] careful"}},
		OutputDropped: 2}))

	if got := out.String(); got != "[rank 1] hello\n" {
		t.Errorf("console stdout %q", got)
	}
	if got := errOut.String(); !strings.Contains(got, "[rank 1] careful\n") || !strings.Contains(got, "2 lines of output not forwarded") {
		t.Errorf("console stderr %q", got)
	}
	if c, ok := o.job.Log(1, "stdout", 0); !ok || len(c.Lines) != 1 || c.Lines[0] != "hello" {
		t.Errorf("rank 1's log: %+v", c)
	}
	o.progress(time.Now(), []rankProgress{{rank: 1, role: RoleWorker, host: "h1", takenRows: 100, takenBatches: 10, bytes: 4096}})
	snap := o.job.Snapshot(time.Now())
	if pts := snap.Scalars["loss"]; len(pts) != 1 || pts[0].V != 0.5 {
		t.Errorf("loss points %v", pts)
	}
	var rank1 *jobview.RankView
	for i := range snap.Ranks {
		if snap.Ranks[i].Rank == 1 {
			rank1 = &snap.Ranks[i]
		}
	}
	if rank1 == nil || rank1.MemoryBytes != 1<<20 || rank1.Rows != 100 || rank1.Bytes != 4096 ||
		rank1.GPUs != 2 || rank1.GPUUtilRatio != 0.6 || rank1.GPUMemoryBytes != 5<<30 {
		t.Errorf("rank 1 in the ranks table: %+v", rank1)
	}
}

// quietManager is a cluster manager that does not bring executors'
// output to the console.
type quietManager struct{ ClusterManager }

func TestOutputForwardedOnlyWhereItIsNotDelivered(t *testing.T) {
	if !outputReachesConsole(&Local{}) {
		t.Error("local executors' output reaches the console through pipes")
	}
	if outputReachesConsole(quietManager{}) {
		t.Error("a manager that does not deliver output needs forwarding")
	}
}

// consoleObserver is an observer of a new job's model whose console prints
// to out and errOut, its lines going to the ranks' logs as the driver's do.
func consoleObserver(out, errOut *syncbuf.Buffer) *observer {
	console := NewConsole(out, errOut, false)
	o := &observer{job: jobview.NewJob(), metrics: metrics.NewDriver(metrics.NewRegistry()), logger: slog.New(slog.DiscardHandler),
		ranks: map[int]rankSeen{}, console: console, usage: map[int]rankUsage{}, roles: map[int]string{}}
	console.setTap(o.outputLine)
	return o
}
