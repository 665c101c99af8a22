package wire

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// heldSource serves its source's epochs held at their end
// (feed.HeldEpoch), counting the asks whether an epoch ends; every ask
// ends it.
type heldSource struct {
	EpochSource
	asked atomic.Int64
}

func (s *heldSource) Epoch(ctx context.Context, epoch int) (feed.Reader, error) {
	r, err := s.EpochSource.Epoch(ctx, epoch)
	if err != nil {
		return nil, err
	}
	return feed.HeldEpoch(r, epoch, func(context.Context, int) (feed.Reader, error) {
		s.asked.Add(1)
		return nil, nil
	}), nil
}

// TestHeldEndWaitsForTheProcess: through shared memory the whole epoch
// fits the region, so the server has sent every batch long before the
// process trained them. A held end is not asked about until the process,
// having read the last batch, asks for the next: until then the server
// waits at its 'H' frame. (Asking as soon as the feed's rows ran out let
// the driver end an epoch that a rank lost inside it still had rows of.)
func TestHeldEndWaitsForTheProcess(t *testing.T) {
	for _, mode := range []Mode{ModeTensor, ModeArrow} {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := testCtx(t)
			src := &heldSource{EpochSource: numSource(t, 8, 50)}
			srv, _ := startServer(t, ServerConfig{Mode: mode, Epochs: 2, Source: src, SharedMemory: true, LabelColumn: "y"})
			next, closeEpoch := dialEpoch(ctx, t, mode, srv.cfg.SocketPath)
			for b := range 8 {
				if err := next(); err != nil {
					t.Fatalf("batch %d: %v", b, err)
				}
			}
			// Every batch is read; the server either asked (the fault) or
			// waits at the 'H' frame it sent.
			testutil.WaitFor(t, 10*time.Second, testutil.Holds("the server to hold the end", func() bool {
				return src.asked.Load() > 0 || srv.shmHolds.Load() > 0
			}))
			if n := src.asked.Load(); n != 0 {
				t.Fatalf("the server asked whether the epoch ends %d times before the process asked beyond its last batch", n)
			}
			if err := next(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the last batch: %v, want the epoch's end", err)
			}
			if n, h := src.asked.Load(), srv.shmHolds.Load(); n != 1 || h != 1 {
				t.Fatalf("asked %d times after %d 'H' frames, want once after one", n, h)
			}
			closeEpoch()
		})
	}
}

// dialEpoch opens the next epoch at sock in mode: next reads a batch
// (releasing it), closeEpoch closes the epoch.
func dialEpoch(ctx context.Context, t *testing.T, mode Mode, sock string) (next func() error, closeEpoch func()) {
	t.Helper()
	if mode == ModeTensor {
		ep, err := DialTensor(ctx, sock)
		if err != nil {
			t.Fatal(err)
		}
		if ep.shm == nil || ep.shm.m == nil {
			t.Fatal("the epoch did not come through shared memory")
		}
		return func() error { _, err := ep.Next(ctx); return err }, func() { _ = ep.Close() }
	}
	ep, err := DialArrow(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	if ep.shm == nil || ep.shm.m == nil {
		t.Fatal("the epoch did not come through shared memory")
	}
	return func() error {
		rec, err := ep.Next(ctx)
		if err == nil {
			rec.Release()
		}
		return err
	}, func() { _ = ep.Close() }
}

// TestPythonAnswersHeldEnds: the Python package, reading every epoch
// through shared memory, answers each epoch's 'H' frame, so that the
// server asks whether the epoch ends (once an epoch) and Python sees
// every epoch whole. A reader that did not answer would wait at the first
// epoch's end until the run's deadline.
func TestPythonAnswersHeldEnds(t *testing.T) {
	pkgDir := pyPrerequisites(t)
	for _, c := range []struct {
		mode Mode
		kind string
	}{{ModeTensor, "tensors"}, {ModeArrow, "batches"}} {
		t.Run(c.mode.String(), func(t *testing.T) {
			src := &heldSource{EpochSource: newPySource(t, false, pyLayout)}
			res, srv, err := pyRunServer(t, pyInterpreter, pkgDir, c.mode, src, len(pyLayout), c.kind, true, "SPINDLE_PYARROW=0")
			pySawLayout(t, res, err)
			for e, ep := range res.Epochs {
				if len(ep.Batches) != len(pyLayout[e]) {
					t.Errorf("epoch %d: python saw %d batches, want %d", e, len(ep.Batches), len(pyLayout[e]))
				}
			}
			if n, h := src.asked.Load(), srv.shmHolds.Load(); n != int64(len(pyLayout)) || h != n {
				t.Errorf("the server asked whether an epoch ends %d times after %d 'H' frames, want %d of each", n, h, len(pyLayout))
			}
		})
	}
}
