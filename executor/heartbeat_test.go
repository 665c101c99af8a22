package executor

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// slowDriver answers heartbeats after delay, as a driver on a loaded
// machine does, and keeps the spans of the heartbeats it answered.
type slowDriver struct {
	driverpb.ControlClient // only Heartbeat is called
	delay                  time.Duration

	mu    sync.Mutex
	spans int
}

func (d *slowDriver) Heartbeat(ctx context.Context, req *driverpb.HeartbeatRequest, _ ...grpc.CallOption) (*driverpb.HeartbeatResponse, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(d.delay):
	}
	d.mu.Lock()
	d.spans += len(req.GetSpans())
	d.mu.Unlock()
	return &driverpb.HeartbeatResponse{}, nil
}

func (d *slowDriver) delivered() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.spans
}

// TestSlowHeartbeatKeepsItsSpans: a driver that takes longer than the
// heartbeat interval to answer (but less than the driver timeout) still
// gets the spans, reports and output lines a heartbeat carries. Cutting
// the call at the interval dropped them: the cause of
// TestTimeline/python missing a rank's spans under load.
func TestSlowHeartbeatKeepsItsSpans(t *testing.T) {
	const interval = 20 * time.Millisecond
	drv := &slowDriver{delay: 5 * interval}
	e := &Executor{cfg: Config{ID: "exec-0"}, logger: slog.New(slog.NewTextHandler(io.Discard, nil)), client: drv}
	obs := &observations{logger: e.logger}
	obs.addSpans([]*driverpb.Span{{Name: "save", Cat: "checkpoint", StartMicros: 1, DurationMicros: 2}})
	task := &Task{HeartbeatIntervalMillis: interval.Milliseconds(), DriverTimeoutMillis: testutil.Scale(10 * time.Second).Milliseconds()}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := e.heartbeat(ctx, task, identity{}, nil, obs, nil)
		done <- err
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("heartbeat: %v", err)
		}
	}()
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("span at the driver", func() bool { return drv.delivered() == 1 }))
}
