package wire

import (
	"context"
	"errors"
	"github.com/spindle-ml/spindle/internal/testutil"
	"io"
	"testing"
	"time"
)

// epochStream is an arrow or tensor epoch being read.
type epochStream interface {
	Close() error
}

// The server tells what the consumer took off the socket apart from what
// it wrote into the socket's buffers: a consumer that has read 3 batches
// is reported at 3 at most, however many batches wait for it, and at every
// batch once it has read them all.
func TestTakenCountsWhatTheConsumerRead(t *testing.T) {
	for _, mode := range []Mode{ModeArrow, ModeTensor} {
		t.Run(string(mode), func(t *testing.T) {
			ctx := testCtx(t)
			const batches, rows = 100, 10_000 // 200 KB batches: the buffers hold dozens
			srv, stop := startServer(t, ServerConfig{Mode: mode, Epochs: 1, Source: numSource(t, batches, rows), LabelColumn: "y"})
			sock := srv.cfg.SocketPath
			var next func() error
			var ep epochStream
			if mode == ModeArrow {
				a, err := DialArrow(ctx, sock)
				if err != nil {
					t.Fatal(err)
				}
				ep, next = a, func() error {
					rec, err := a.Next(ctx)
					if err == nil {
						rec.Release()
					}
					return err
				}
			} else {
				tn, err := DialTensor(ctx, sock)
				if err != nil {
					t.Fatal(err)
				}
				ep, next = tn, func() error { _, err := tn.Next(ctx); return err }
			}
			for range 3 {
				if err := next(); err != nil {
					t.Fatal(err)
				}
			}
			// Read-ahead fills the socket's buffers while the consumer
			// waits; what the consumer read is counted as the server sees
			// its socket drain, which may come a moment later.
			testutil.WaitFor(t, 10*time.Second, testutil.Holds("condition", func() bool { st := srv.Stats(); return st.Batches >= 10 && st.TakenBatches >= 2 }))
			st := srv.Stats()
			if st.TakenBatches > 4 || st.TakenBatches < 2 {
				t.Fatalf("sent %d batches, consumer read 3: taken reported as %d", st.Batches, st.TakenBatches)
			}
			if st.TakenRows != st.TakenBatches*rows {
				t.Fatalf("taken rows %d for %d batches", st.TakenRows, st.TakenBatches)
			}
			n := 3
			for {
				err := next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				n++
			}
			ep.Close()
			if n != batches {
				t.Fatalf("read %d batches, want %d", n, batches)
			}
			// The stream after the last epoch: the consumer is done with it.
			if mode == ModeArrow {
				a, err := DialArrow(ctx, sock)
				if err == nil {
					a.Close()
				}
			} else if tn, err := DialTensor(ctx, sock); err == nil {
				tn.Close()
			}
			testutil.WaitFor(t, 10*time.Second, testutil.Holds("condition", func() bool { return srv.Stats().TakenBatches == batches }))
			if st := srv.Stats(); st.TakenRows != batches*rows {
				t.Fatalf("taken rows %d, want %d", st.TakenRows, batches*rows)
			}
			if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
		})
	}
}
