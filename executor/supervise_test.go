package executor

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// silentDriver answers no heartbeat, as a driver that is gone (or starved
// past the driver timeout) does.
type silentDriver struct {
	driverpb.ControlClient // only Heartbeat is called
}

func (silentDriver) Heartbeat(context.Context, *driverpb.HeartbeatRequest, ...grpc.CallOption) (*driverpb.HeartbeatResponse, error) {
	return nil, status.Error(codes.Unavailable, "connection refused")
}

// quietDriver answers every heartbeat and never stops the job.
type quietDriver struct {
	driverpb.ControlClient // only Heartbeat is called
}

func (quietDriver) Heartbeat(context.Context, *driverpb.HeartbeatRequest, ...grpc.CallOption) (*driverpb.HeartbeatResponse, error) {
	return &driverpb.HeartbeatResponse{}, nil
}

// failingHook is a service whose loop fails while the process runs.
type failingHook struct{ err error }

func (failingHook) Name() string                            { return "failing" }
func (failingHook) Prepare(context.Context, *taskRun) error { return nil }
func (failingHook) Close() error                            { return nil }
func (h failingHook) Run(ctx context.Context) error         { return h.err }

// superviseSleeper runs a training process that would sleep for a minute
// under superviseTask with the driver client and hooks given.
func superviseSleeper(t *testing.T, client driverpb.ControlClient, hooks []taskHook) (taskResult, error) {
	t.Helper()
	proc, err := startProcess([]string{"sleep", "60"}, t.TempDir(), nil, nil, "", io.Discard, io.Discard, 10)
	if err != nil {
		t.Fatal(err)
	}
	e := &Executor{cfg: Config{ID: "exec-0", DriverAddr: "127.0.0.1:1"}, logger: slog.New(slog.NewTextHandler(io.Discard, nil)), client: client}
	r := &taskRun{t: &Task{HeartbeatIntervalMillis: 20, DriverTimeoutMillis: 200, StopGraceMillis: testutil.Scale(5 * time.Second).Milliseconds()}}
	return e.superviseTask(context.Background(), r, proc, hooks, taskResult{})
}

// TestLostDriverIsReportedAsTheCause: an executor that stops its training
// process because the driver stopped answering says so in its error,
// which its exit report carries to the driver (when the driver can hear
// it again) and its own stderr shows. It used to report only that the
// process was killed by SIGTERM and exit as a stopped executor does, which
// left a job failed under load with no cause named.
func TestLostDriverIsReportedAsTheCause(t *testing.T) {
	res, err := superviseSleeper(t, silentDriver{}, nil)
	if err == nil || !strings.Contains(err.Error(), "lost the driver at 127.0.0.1:1") {
		t.Fatalf("superviseTask error %v, want the lost driver named", err)
	}
	if res.exit.signal != "SIGTERM" || !strings.Contains(res.stopped, "lost the driver") {
		t.Fatalf("result: exit %v, stopped %q; want the process stopped with SIGTERM for the lost driver", res.exit, res.stopped)
	}
}

// TestFailedServiceIsReportedAsTheCause: a service of the task (here one
// standing for the checkpoint service) that fails while the process runs
// stops the process, and its error is the task's, not "the executor was
// told to stop".
func TestFailedServiceIsReportedAsTheCause(t *testing.T) {
	boom := errors.New("checkpoint service: accept: too many open files")
	res, err := superviseSleeper(t, quietDriver{}, []taskHook{failingHook{err: boom}})
	if !errors.Is(err, boom) {
		t.Fatalf("superviseTask error %v, want the service's %v", err, boom)
	}
	if res.stopped != boom.Error() {
		t.Fatalf("stopped %q, want the service's error", res.stopped)
	}
}
