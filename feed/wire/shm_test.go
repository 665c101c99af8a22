package wire

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// checkNum checks that rec is batch b of epoch e from numBatch.
func checkNum(t *testing.T, rec arrow.RecordBatch, e, b int) {
	t.Helper()
	xs := rec.Column(0).(*array.Float32).Float32Values()
	ys := rec.Column(2).(*array.Float64).Float64Values()
	for r := range xs {
		v := float64(e*1_000_000 + b*1000 + r)
		if xs[r] != float32(v) || ys[r] != v/2 {
			t.Fatalf("epoch %d batch %d row %d: x %v y %v, want %v and %v", e, b, r, xs[r], ys[r], float32(v), v/2)
		}
	}
}

// notHeld is the hold wait of tests that assert no message went inline:
// a client that reads every batch and frees each before the next is
// never holding the region, but on a loaded machine (the race detector,
// a second make test) it can be starved for longer than shmHoldWait
// between its last read and its next free, which the server would take
// for holding. Scaled when a test asks, at the load then.
func notHeld() time.Duration { return testutil.Scale(2 * time.Second) }

// TestSharedMemoryEpochs reads epochs through shared memory: the same
// batches as over the socket, the stream's bytes in the region rather
// than the socket, the region's space reused as batches are released,
// and a private socket that goes away with the server.
func TestSharedMemoryEpochs(t *testing.T) {
	ctx := testCtx(t)
	srv, stop := startServer(t, ServerConfig{Mode: ModeArrow, Epochs: 2, Source: numSource(t, 40, 100), SharedMemory: true},
		func(s *Server) { s.shm.size, s.shm.holdWait = 64<<10, notHeld() }) // room for a few batches of ~2 KB at a time
	shmPath := SharedMemoryPath(srv.cfg.SocketPath)
	fi, err := os.Lstat(shmPath)
	if err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("shared-memory socket %s: %v, %v; want a socket with mode 0600", shmPath, fi, err)
	}
	for want := range 2 {
		ep, err := DialArrow(ctx, srv.cfg.SocketPath)
		if err != nil {
			t.Fatal(err)
		}
		if ep.shm == nil || ep.shm.m == nil {
			t.Fatal("the epoch did not come through shared memory")
		}
		if ep.Epoch() != want {
			t.Fatalf("epoch %d, want %d", ep.Epoch(), want)
		}
		for b := 0; ; b++ {
			rec, err := ep.Next(ctx)
			if errors.Is(err, io.EOF) {
				if b != 40 {
					t.Fatalf("epoch %d ended after %d batches, want 40", want, b)
				}
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			checkNum(t, rec, want, b)
			if n := rec.Column(1).NullN(); n != 33 {
				t.Fatalf("batch %d: %d nulls in n, want 33", b, n)
			}
			rec.Release()
		}
		ep.Close()
	}
	epoch, xs := readArrowEpoch(ctx, t, srv.cfg.SocketPath)
	if epoch != -1 || len(xs) != 0 {
		t.Fatalf("after the last epoch: epoch %d with %d rows", epoch, len(xs))
	}
	st := srv.Stats()
	if st.Rows != 8000 || st.Batches != 80 || srv.shmBytes.Load() < 80*1200 || srv.bytes.Load() > 80*100 {
		t.Fatalf("stats %+v: %d bytes in shared memory and %d on the socket; want the batches' bytes in shared memory",
			st, srv.shmBytes.Load(), srv.bytes.Load())
	}
	if n := srv.shmInline.Load(); n != 0 {
		t.Fatalf("%d messages went inline; released batches should free their space", n)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(shmPath); !os.IsNotExist(err) {
		t.Fatalf("the shared-memory socket is still there after the server stopped: %v", err)
	}
}

// TestSharedMemoryHeldBatches holds every batch of an epoch, more than the
// region holds: the stream goes on inline instead of stalling, and every
// batch, from the region or not, keeps its values until released, even
// after the epoch is closed and the next one read.
func TestSharedMemoryHeldBatches(t *testing.T) {
	ctx := testCtx(t)
	srv, _ := startServer(t, ServerConfig{Mode: ModeArrow, Epochs: 2, Source: numSource(t, 30, 100), SharedMemory: true},
		func(s *Server) { s.shm.size = 16 << 10 })
	ep, err := DialArrow(ctx, srv.cfg.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	held := holdEpoch(ctx, t, ep)
	m := ep.shm.m
	ep.Close()
	if len(held) != 30 || srv.shmInline.Load() == 0 || srv.shmBytes.Load() == 0 {
		t.Fatalf("%d batches, %d inline, %d bytes in shared memory; want 30, some of each", len(held), srv.shmInline.Load(), srv.shmBytes.Load())
	}
	if epoch, xs := readArrowEpoch(ctx, t, srv.cfg.SocketPath); epoch != 1 || len(xs) != 3000 {
		t.Fatalf("next epoch: %d with %d rows", epoch, len(xs))
	}
	for b, rec := range held {
		checkNum(t, rec, 0, b)
		rec.Release()
	}
	m.mu.Lock()
	unmapped, refs := m.unmap, m.refs
	m.mu.Unlock()
	if !unmapped || refs != 0 {
		t.Fatalf("after the last release the region is unmapped %t with %d references; want unmapped, none", unmapped, refs)
	}
	// The frees went over epoch 0's connection, kept open for them: the
	// server's region is empty again.
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("condition", func() bool { return regionInUse(srv) == 0 }))
}

// holdEpoch reads every batch of ep's epoch and returns them, held (the
// caller releases them).
func holdEpoch(ctx context.Context, t *testing.T, ep *ArrowEpoch) []arrow.RecordBatch {
	t.Helper()
	var held []arrow.RecordBatch
	for {
		rec, err := ep.Next(ctx)
		if errors.Is(err, io.EOF) {
			return held
		}
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, rec)
	}
}

// regionInUse is the bytes of the server's region that hold messages.
func regionInUse(s *Server) int64 {
	r := s.shm.region
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inUse
}

// TestSharedMemoryHeldWaitsOnce holds every batch of an epoch that the
// region cannot hold: the server waits for room once, and with nothing
// freed since, sends the rest inline at once instead of waiting again
// before each message (200 waits would take seconds).
func TestSharedMemoryHeldWaitsOnce(t *testing.T) {
	ctx := testCtx(t)
	srv, _ := startServer(t, ServerConfig{Mode: ModeArrow, Epochs: 1, Source: numSource(t, 300, 100), SharedMemory: true},
		func(s *Server) { s.shm.size = 64 << 10 })
	ep, err := DialArrow(ctx, srv.cfg.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	held := holdEpoch(ctx, t, ep)
	defer func() {
		for _, rec := range held {
			rec.Release()
		}
	}()
	inline, waits := srv.shmInline.Load(), srv.shmWaitedOut.Load()
	if len(held) != 300 || inline < 100 || waits != 1 {
		t.Fatalf("%d batches, %d messages inline after %d waits for room ran out; want 300, most inline, 1 wait", len(held), inline, waits)
	}
}

// TestSharedMemoryEarlyClose closes an epoch after one batch, still
// holding it: the server stops sending and serves the next epoch, and the
// batch keeps its values until released, when its space comes back.
func TestSharedMemoryEarlyClose(t *testing.T) {
	ctx := testCtx(t)
	// 500 batches of 100 rows: the region (64 KiB) holds about 30.
	srv, _ := startServer(t, ServerConfig{Mode: ModeArrow, Epochs: 2, Source: numSource(t, 500, 100), SharedMemory: true},
		func(s *Server) { s.shm.size = 64 << 10 })
	ep, err := DialArrow(ctx, srv.cfg.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	first, err := ep.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ep.Close()
	if epoch, xs := readArrowEpoch(ctx, t, srv.cfg.SocketPath); epoch != 1 || len(xs) != 50000 {
		t.Fatalf("next epoch: %d with %d rows", epoch, len(xs))
	}
	checkNum(t, first, 0, 0)
	if regionInUse(srv) == 0 {
		t.Fatal("the held batch's space was freed while it was held")
	}
	first.Release()
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("condition", func() bool { return regionInUse(srv) == 0 }))
	// The server counts an epoch served after its stream's end reached
	// the consumer, which may be a moment after the consumer read it.
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("second epoch counted served", func() bool { return srv.Stats().EpochsServed == 2 }))
	if st := srv.Stats(); st.Batches >= 1000 {
		t.Fatalf("stats %+v: want both epochs served, the first cut short", st)
	}
}

// TestSharedMemorySourceFailure cuts a shared-memory stream whose source
// fails: the client sees ErrTruncated, never a short epoch.
func TestSharedMemorySourceFailure(t *testing.T) {
	ctx := testCtx(t)
	src := numSource(t, 3, 4)
	src.failAfter = 1
	srv, err := NewServer(ServerConfig{SocketPath: filepath.Join(shortTempDir(t), "feed.sock"), Mode: ModeArrow, Epochs: 1, Source: src, SharedMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run(ctx) }()
	ep, err := DialArrow(ctx, srv.cfg.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		var rec arrow.RecordBatch
		if rec, err = ep.Next(ctx); err != nil {
			break
		}
		got++
		rec.Release()
	}
	ep.Close()
	if ep.shm == nil || got != 1 || !errors.Is(err, ErrTruncated) {
		t.Fatalf("shared memory %t: read %d batches then %v; want 1 batch then ErrTruncated", ep.shm != nil, got, err)
	}
	if err := <-runErr; !errors.Is(err, errSourceBroke) {
		t.Fatalf("Run = %v, want the source's error", err)
	}
}

// TestSharedMemoryBadFree has a client free an offset it was never given:
// the server stops that stream (the next connection gets the next epoch)
// and frees nothing.
func TestSharedMemoryBadFree(t *testing.T) {
	ctx := testCtx(t)
	srv, _ := startServer(t, ServerConfig{Mode: ModeArrow, Epochs: 2, Source: numSource(t, 2000, 100), SharedMemory: true},
		func(s *Server) { s.shm.size = 16 << 10 })
	c, err := net.Dial("unix", SharedMemoryPath(srv.cfg.SocketPath))
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := readRegion(c.(*net.UnixConn))
	if err != nil {
		t.Fatal(err)
	}
	var b [shmFreeBytes]byte
	binary.LittleEndian.PutUint64(b[:], 12345)
	if _, err := c.Write(b[:]); err != nil {
		t.Fatal(err)
	}
	// Reading on, the stream ends without its end frame.
	for {
		msg, err := msgs.Message()
		if err != nil {
			if errors.Is(err, io.EOF) {
				t.Fatalf("the stream ended cleanly, want it cut")
			}
			break
		}
		_ = msg
	}
	msgs.close()
	c.Close()
	if epoch, xs := readArrowEpoch(ctx, t, srv.cfg.SocketPath); epoch != 1 || len(xs) != 200000 {
		t.Fatalf("next epoch: %d with %d rows", epoch, len(xs))
	}
}

// TestSharedMemoryOff keeps the plain socket alone when SharedMemory is
// off, and DialArrow then reads it as before.
func TestSharedMemoryOff(t *testing.T) {
	ctx := testCtx(t)
	srv, _ := startServer(t, ServerConfig{Mode: ModeArrow, Epochs: 1, Source: numSource(t, 2, 3)})
	if _, err := os.Lstat(SharedMemoryPath(srv.cfg.SocketPath)); !os.IsNotExist(err) {
		t.Fatalf("a shared-memory socket without SharedMemory: %v", err)
	}
	ep, err := DialArrow(ctx, srv.cfg.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	if ep.shm != nil {
		t.Fatal("the epoch came through shared memory")
	}
}

// TestSharedMemoryTensorEarlyClose closes a tensor epoch after one batch
// of many: the server stops sending, serves the next epoch, and every
// message's space comes back.
func TestSharedMemoryTensorEarlyClose(t *testing.T) {
	ctx := testCtx(t)
	srv, _ := startServer(t, ServerConfig{Mode: ModeTensor, Epochs: 2, Source: numSource(t, 500, 100), LabelColumn: "y", SharedMemory: true},
		func(s *Server) { s.shm.size, s.shm.holdWait = 64<<10, notHeld() })
	ep, err := DialTensor(ctx, srv.cfg.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	if ep.shm == nil || ep.shm.m == nil {
		t.Fatal("the epoch did not come through shared memory")
	}
	b, err := ep.Next(ctx)
	if err != nil || b.Rows != 100 || b.Features[0] != 0 || b.Labels[99] != 99.0/2 {
		t.Fatalf("first batch: %d rows, %v", b.Rows, err)
	}
	b.Features[0] = 7 // the batch is the client's to change
	ep.Close()
	ep, err = DialTensor(ctx, srv.cfg.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for {
		b, err := ep.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if b.Features[0] != float32(1_000_000+rows/100*1000) {
			t.Fatalf("epoch 1 row %d: x %v", rows, b.Features[0])
		}
		rows += b.Rows
	}
	ep.Close()
	if ep.Epoch() != 1 || rows != 50000 || srv.shmInline.Load() != 0 {
		t.Fatalf("epoch %d: %d rows, %d messages inline (%d waits ran out); want epoch 1, 50000 rows, none inline", ep.Epoch(), rows, srv.shmInline.Load(), srv.shmWaitedOut.Load())
	}
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("condition", func() bool { return regionInUse(srv) == 0 }))
}

// pyKeepBatch keeps the first batch of epoch 0 (argv[1]: tensor or arrow)
// while it reads epoch 1, then lets it go when told.
const pyKeepBatch = `
import gc, json, sys
import spindle
tensor = sys.argv[1] == "tensor"
ep = spindle.tensors() if tensor else spindle.batches()
b0 = next(iter(ep))
x0, y0 = b0 if tensor else (b0["x"].reshape(-1, 1), b0["y"])
del b0
ep.close()
ep1 = spindle.tensors() if tensor else spindle.batches()
rows = 0
for b in ep1:
    rows += len(b[0] if tensor else b["x"])
del b
ep1.close()
print(json.dumps({"epoch": ep1.epoch, "rows": rows, "x": [float(x0[r, 0]) for r in range(3)],
                  "y": float(y0[2]), "writable": bool(x0.flags.writeable)}), flush=True)
sys.stdin.readline()
del x0, y0
gc.collect()
print("released", flush=True)
sys.stdin.readline()
`

// TestPythonKeepsSharedBatch has the Python package keep a batch taken
// through shared memory (without a copy: tensors, its own Arrow reader and
// pyarrow's) past its epoch: it keeps its values while the next epoch
// goes through the region, and its space comes back only once Python lets
// it go.
func TestPythonKeepsSharedBatch(t *testing.T) {
	pkgDir := pyPrerequisites(t)
	for _, tc := range []struct {
		mode    Mode
		pyarrow bool
	}{{ModeTensor, false}, {ModeArrow, false}, {ModeArrow, true}} {
		mode := tc.mode
		t.Run(fmt.Sprintf("%s/pyarrow=%t", mode, tc.pyarrow), func(t *testing.T) {
			py, env := pyInterpreter, "SPINDLE_PYARROW=0"
			if tc.pyarrow {
				py, env = pyarrowInterpreter(t), "SPINDLE_PYARROW=1"
			}
			srv, _ := startServer(t, ServerConfig{Mode: mode, Epochs: 2, Source: numSource(t, 50, 100), LabelColumn: "y", SharedMemory: true},
				func(s *Server) { s.shm.size, s.shm.holdWait = 256<<10, notHeld() })
			cmd := exec.Command(py, "-c", pyKeepBatch, string(mode))
			cmd.Env = append(os.Environ(), "PYTHONPATH="+pkgDir, "SPINDLE_FEED="+srv.cfg.SocketPath,
				"SPINDLE_FEED_MODE="+string(mode), env)
			var stderr syncbuf.Buffer
			cmd.Stderr = &stderr
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Wait() }()
			defer stdin.Close()
			out := bufio.NewReader(stdout)
			line, err := out.ReadString('\n')
			if err != nil {
				t.Fatalf("python: %v\n%s", err, stderr.String())
			}
			var got struct {
				Epoch, Rows int
				X           []float64
				Y           float64
				Writable    bool
			}
			if err := json.Unmarshal([]byte(line), &got); err != nil {
				t.Fatalf("python said %q: %v", line, err)
			}
			if got.Epoch != 1 || got.Rows != 5000 || fmt.Sprint(got.X) != "[0 1 2]" || got.Y != 1 || (mode == ModeTensor && !got.Writable) {
				t.Fatalf("python saw %+v; want epoch 1 of 5000 rows, and the kept batch's x 0 1 2, y 1 (writable tensors)", got)
			}
			if regionInUse(srv) == 0 {
				t.Fatal("the kept batch's space was handed back while Python held it")
			}
			if _, err := io.WriteString(stdin, "go\n"); err != nil {
				t.Fatal(err)
			}
			if line, err := out.ReadString('\n'); err != nil || line != "released\n" {
				t.Fatalf("python: %q %v\n%s", line, err, stderr.String())
			}
			testutil.WaitFor(t, 10*time.Second, testutil.Holds("condition", func() bool { return regionInUse(srv) == 0 }))
			// pyarrow lets go of a batch's buffers later than the package's
			// own reader, and may leave the region full for a moment.
			if n := srv.shmInline.Load(); n != 0 && !tc.pyarrow {
				t.Errorf("%d messages went inline", n)
			}
		})
	}
}

// newTestRegion makes a SharedRegion that the test closes at its end,
// failing it if some batch still holds part of the region then.
func newTestRegion(t *testing.T) *SharedRegion {
	t.Helper()
	r, err := NewSharedRegion(0)
	if err != nil {
		t.Skipf("no shared memory here: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return r
}
