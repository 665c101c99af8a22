package scaletest

import (
	"math"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// Each simulated heartbeat carries what a real one from a busy rank
// carries: the feed's progress and position, the training process's usage,
// one reported step with a few values, and the spans of the steps since
// the last heartbeat.
const (
	rowsPerHeartbeat    = 4096
	batchesPerHeartbeat = 16
	batchesPerEpoch     = 1000
	spansPerHeartbeat   = 4
)

// training is a simulated rank's training process as its heartbeats see it.
type training struct {
	rank    int32
	step    int64
	rows    int64
	batches int64
}

func newTraining(rank int32) *training { return &training{rank: rank} }

// heartbeat advances the training by one heartbeat's worth and returns
// the heartbeat that reports it.
func (t *training) heartbeat(id string) *driverpb.HeartbeatRequest {
	t.step += batchesPerHeartbeat
	t.rows += rowsPerHeartbeat
	t.batches += batchesPerHeartbeat
	now := time.Now()
	spans := make([]*driverpb.Span, spansPerHeartbeat)
	for i := range spans {
		spans[i] = &driverpb.Span{Name: "train_step", Cat: "step", StartMicros: now.UnixMicro() - int64(i)*1000, DurationMicros: 900}
	}
	return &driverpb.HeartbeatRequest{
		ExecutorId: id,
		Rank:       t.rank,
		Progress:   t.progress(),
		Usage:      &driverpb.Usage{CpuSeconds: float64(t.step) * 0.01, MemoryBytes: 2 << 30},
		Reports: []*driverpb.Report{{Step: t.step, UnixMillis: now.UnixMilli(), Values: map[string]float64{
			"loss": 1 / math.Sqrt(float64(t.step)), "lr": 0.01, "examples_per_sec": 25000,
		}}},
		Spans: spans,
	}
}

// progress is the feed's position: rows and batches fed, the epoch, and
// the batches the training process took.
func (t *training) progress() *driverpb.Progress {
	return &driverpb.Progress{Rows: t.rows, Batches: t.batches, Epoch: int32(t.batches / batchesPerEpoch),
		TakenRows: t.rows, TakenBatches: t.batches, Bytes: t.rows * 64}
}

// exit is the report of a training process that ended well.
func (t *training) exit(id string) *driverpb.ExitReport {
	return &driverpb.ExitReport{ExecutorId: id, Rank: t.rank, ExitCode: 0, Progress: t.progress(),
		Usage: &driverpb.Usage{CpuSeconds: float64(t.step) * 0.01, MemoryBytes: 2 << 30}}
}
