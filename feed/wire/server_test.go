package wire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/spindle-ml/spindle/feed"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"
	"golang.org/x/sync/errgroup"

	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testutil"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(consumerEnv); role != "" {
		// The benchmark re-executes this test binary as its consumer process.
		os.Exit(runConsumer(role))
	}
	feed.RegisterPageCodecs() // as the spindle binary does
	code := m.Run()
	removeBenchData()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Mode
		err  bool
	}{
		{"arrow", ModeArrow, false},
		{" Tensor ", ModeTensor, false},
		{"DIRECT", ModeDirect, false},
		{"", "", true},
		{"numpy", "", true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseMode(tc.in)
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("ParseMode(%q) = %q, %v; want %q, error %t", tc.in, got, err, tc.want, tc.err)
			}
			if err != nil && !errors.Is(err, ErrUnknownMode) {
				t.Fatalf("error %v is not ErrUnknownMode", err)
			}
		})
	}
}

func TestServerConfigValidate(t *testing.T) {
	src := numSource(t, 1, 1)
	good := ServerConfig{SocketPath: "feed.sock", Mode: ModeArrow, Epochs: 1, Source: src}
	for _, tc := range []struct {
		name   string
		modify func(*ServerConfig)
		want   string
	}{
		{"no path", func(c *ServerConfig) { c.SocketPath = "" }, "no socket path"},
		{"long path", func(c *ServerConfig) { c.SocketPath = "/" + strings.Repeat("d", 120) + "/f.sock" }, "at most 107"},
		{"direct mode", func(c *ServerConfig) { c.Mode = ModeDirect }, `mode "direct"`},
		{"zero epochs", func(c *ServerConfig) { c.Epochs = 0 }, "0 epochs"},
		{"no source", func(c *ServerConfig) { c.Source = nil }, "no epoch source"},
		{"tensor label missing", func(c *ServerConfig) { c.Mode, c.LabelColumn = ModeTensor, "z" }, `label column "z"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.modify(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
}

// readArrowEpoch reads a whole epoch and returns its epoch number and the
// x column's values.
func readArrowEpoch(ctx context.Context, t *testing.T, sock string) (int, []float32) {
	t.Helper()
	ep, err := DialArrow(ctx, sock)
	if err != nil {
		t.Fatalf("DialArrow: %v", err)
	}
	defer ep.Close()
	var xs []float32
	for {
		rec, err := ep.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("epoch %d: Next: %v", ep.Epoch(), err)
		}
		xs = append(xs, rec.Column(0).(*array.Float32).Float32Values()...)
		rec.Release()
	}
	return ep.Epoch(), xs
}

func TestArrowEpochSequence(t *testing.T) {
	ctx := testCtx(t)
	srv, stop := startServer(t, ServerConfig{Mode: ModeArrow, Epochs: 3, Source: numSource(t, 4, 5)})
	sock := srv.cfg.SocketPath
	for want := range 3 {
		epoch, xs := readArrowEpoch(ctx, t, sock)
		if epoch != want {
			t.Fatalf("connection %d got epoch %d", want, epoch)
		}
		if len(xs) != 20 {
			t.Fatalf("epoch %d: %d rows, want 20", epoch, len(xs))
		}
		for i, x := range xs {
			if w := float32(epoch*1_000_000 + (i/5)*1000 + i%5); x != w {
				t.Fatalf("epoch %d row %d: x = %v, want %v", epoch, i, x, w)
			}
		}
	}
	// After the last epoch: empty streams, as often as asked.
	for range 2 {
		epoch, xs := readArrowEpoch(ctx, t, sock)
		if epoch != -1 || len(xs) != 0 {
			t.Fatalf("after the last epoch: epoch %d with %d rows, want -1 and none", epoch, len(xs))
		}
	}
	st := srv.Stats()
	if st.Epoch != 2 || st.EpochsServed != 3 || st.Rows != 60 || st.Batches != 12 || st.Bytes == 0 {
		t.Fatalf("Stats = %+v", st)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestArrowIsStandardIPC reads a connection's raw bytes with nothing but
// arrow-go's own IPC reader, which is what pyarrow and arrow-js also see.
func TestArrowIsStandardIPC(t *testing.T) {
	srv, _ := startServer(t, ServerConfig{Mode: ModeArrow, Epochs: 1, Source: numSource(t, 2, 3)})
	c, err := net.Dial("unix", srv.cfg.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(c)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(raw, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}) {
		t.Fatalf("stream does not end with the IPC end-of-stream marker: % x", raw[max(0, len(raw)-8):])
	}
	rd, err := ipc.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("ipc.NewReader: %v", err)
	}
	defer rd.Release()
	if got, _ := rd.Schema().Metadata().GetValue("spindle.epoch"); got != "0" {
		t.Fatalf("spindle.epoch = %q, want 0", got)
	}
	if !rd.Schema().Equal(numSchema) {
		t.Fatalf("schema %v, want %v", rd.Schema(), numSchema)
	}
	var rows int64
	var nulls int
	for rd.Next() {
		rows += rd.RecordBatch().NumRows()
		nulls += rd.RecordBatch().Column(1).NullN()
	}
	if rd.Err() != nil || rows != 6 || nulls != 2 {
		t.Fatalf("read %d rows, %d nulls, err %v; want 6 rows, 2 nulls", rows, nulls, rd.Err())
	}
}

// overBoth runs test over the plain socket and through shared memory.
func overBoth(t *testing.T, test func(t *testing.T, shm bool)) {
	for _, shm := range []bool{false, true} {
		t.Run(map[bool]string{false: "socket", true: "shm"}[shm], func(t *testing.T) { test(t, shm) })
	}
}

func TestTensorEpochSequence(t *testing.T) { overBoth(t, testTensorEpochSequence) }

func testTensorEpochSequence(t *testing.T, shm bool) {
	ctx := testCtx(t)
	srv, stop := startServer(t, ServerConfig{Mode: ModeTensor, Epochs: 2, Source: numSource(t, 3, 4), LabelColumn: "y", SharedMemory: shm})
	sock := srv.cfg.SocketPath
	for want := range 2 {
		ep, err := DialTensor(ctx, sock)
		if err != nil {
			t.Fatalf("DialTensor: %v", err)
		}
		if ep.Epoch() != want {
			t.Fatalf("connection %d got epoch %d", want, ep.Epoch())
		}
		if (ep.shm != nil) != shm {
			t.Fatalf("through shared memory: %t, want %t", ep.shm != nil, shm)
		}
		if got := strings.Join(ep.FeatureNames(), ","); got != "x,n" {
			t.Fatalf("features %s, want x,n", got)
		}
		if l, ok := ep.LabelName(); l != "y" || !ok {
			t.Fatalf("label %q %t, want y", l, ok)
		}
		for b := 0; ; b++ {
			batch, err := ep.Next(ctx)
			if errors.Is(err, io.EOF) {
				if b != 3 {
					t.Fatalf("epoch %d ended after %d batches, want 3", want, b)
				}
				break
			}
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			if batch.Rows != 4 || len(batch.Features) != 8 || len(batch.Labels) != 4 {
				t.Fatalf("batch %d: %d rows, %d features, %d labels", b, batch.Rows, len(batch.Features), len(batch.Labels))
			}
			for r := range batch.Rows {
				v := float64(want*1_000_000 + b*1000 + r)
				wantN := float32(-r)
				if r%3 == 2 {
					wantN = float32(math.NaN())
				}
				gotX, gotN, gotY := batch.Features[2*r], batch.Features[2*r+1], batch.Labels[r]
				if gotX != float32(v) || !sameFloat(gotN, wantN) || gotY != float32(v/2) {
					t.Fatalf("epoch %d batch %d row %d: x=%v n=%v y=%v, want %v %v %v", want, b, r, gotX, gotN, gotY, float32(v), wantN, float32(v/2))
				}
			}
		}
		ep.Close()
	}
	ep, err := DialTensor(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ep.Next(ctx); ep.Epoch() != -1 || !errors.Is(err, io.EOF) {
		t.Fatalf("after the last epoch: epoch %d, Next error %v; want -1 and io.EOF", ep.Epoch(), err)
	}
	ep.Close()
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func sameFloat(a, b float32) bool {
	return a == b || (a != a && b != b)
}

func TestSocketPermissionsAndCleanup(t *testing.T) {
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "feed.sock")
	// A socket left by a crashed executor is replaced.
	old, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	old.(*net.UnixListener).SetUnlinkOnClose(false)
	old.Close()

	_, stop := startServer(t, ServerConfig{SocketPath: sock, Mode: ModeArrow, Epochs: 1, Source: numSource(t, 1, 1)})
	fi, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want a socket with 0600", fi.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only the socket", len(entries))
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("socket still exists after Run returned: %v", err)
	}

	// Any other file in the way is refused, not deleted.
	if err := os.WriteFile(sock, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = NewServer(ServerConfig{SocketPath: sock, Mode: ModeArrow, Epochs: 1, Source: numSource(t, 1, 1)})
	if err == nil || !strings.Contains(err.Error(), "is not a socket") {
		t.Fatalf("NewServer over a regular file: %v", err)
	}
}

func TestCloseWithoutRun(t *testing.T) {
	sock := filepath.Join(shortTempDir(t), "feed.sock")
	srv, err := NewServer(ServerConfig{SocketPath: sock, Mode: ModeTensor, Epochs: 1, Source: numSource(t, 1, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("socket still exists after Close: %v", err)
	}
	if _, err := DialTensor(testCtx(t), sock); err == nil || !strings.Contains(err.Error(), sock) {
		t.Fatalf("DialTensor on a closed feed: %v, want an error naming the socket", err)
	}
}

// TestConsumerLeavesMidEpoch has the consumer read one batch of an epoch
// far larger than the socket buffers and hang up: the server must carry
// on with the next epoch on the next connection.
func TestConsumerLeavesMidEpoch(t *testing.T) {
	for _, mode := range []Mode{ModeArrow, ModeTensor} {
		t.Run(string(mode), func(t *testing.T) {
			ctx := testCtx(t)
			// 20 MB per epoch: more than the socket buffers hold.
			var logs syncbuf.Buffer
			srv, stop := startServer(t, ServerConfig{Mode: mode, Epochs: 2, Source: numSource(t, 100, 10_000), LabelColumn: "y",
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			sock := srv.cfg.SocketPath
			if mode == ModeArrow {
				ep, err := DialArrow(ctx, sock)
				if err != nil {
					t.Fatal(err)
				}
				rec, err := ep.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				rec.Release()
				ep.Close()
				ep, err = DialArrow(ctx, sock)
				if err != nil {
					t.Fatal(err)
				}
				if ep.Epoch() != 1 {
					t.Fatalf("connection after an abandoned epoch 0 got epoch %d, want 1", ep.Epoch())
				}
				ep.Close()
			} else {
				ep, err := DialTensor(ctx, sock)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := ep.Next(ctx); err != nil {
					t.Fatal(err)
				}
				ep.Close()
				ep, err = DialTensor(ctx, sock)
				if err != nil {
					t.Fatal(err)
				}
				if ep.Epoch() != 1 {
					t.Fatalf("connection after an abandoned epoch 0 got epoch %d, want 1", ep.Epoch())
				}
				ep.Close()
			}
			testutil.WaitFor(t, 10*time.Second, testutil.Holds("condition", func() bool { return srv.Stats().EpochsServed == 2 }))
			if err := stop(); err != nil {
				t.Fatalf("Run after consumers left mid-epoch: %v", err)
			}
			_, line, _ := strings.Cut(logs.String(), `msg="consumer disconnected mid-epoch; counting the epoch as served"`)
			line, _, _ = strings.Cut(line, "\n")
			if !strings.Contains(line, "component=feed mode="+string(mode)) || !strings.Contains(line, " epoch=0 ") {
				t.Fatalf("no log of the disconnect in epoch 0:\n%s", logs.String())
			}
		})
	}
}

// TestSourceFailureCutsStream checks that a consumer never mistakes an
// epoch the executor failed to read for a complete one.
func TestSourceFailureCutsStream(t *testing.T) { overBoth(t, testSourceFailureCutsStream) }

func testSourceFailureCutsStream(t *testing.T, shm bool) {
	for _, mode := range []Mode{ModeArrow, ModeTensor} {
		t.Run(string(mode), func(t *testing.T) {
			ctx := testCtx(t)
			src := numSource(t, 3, 4)
			src.failAfter = 1
			srv, err := NewServer(ServerConfig{SocketPath: filepath.Join(shortTempDir(t), "feed.sock"), Mode: mode, Epochs: 1, Source: src, SharedMemory: shm})
			if err != nil {
				t.Fatal(err)
			}
			runErr := make(chan error, 1)
			go func() { runErr <- srv.Run(ctx) }()
			var got int
			if mode == ModeArrow {
				var ep *ArrowEpoch
				if ep, err = DialArrow(ctx, srv.cfg.SocketPath); err != nil {
					t.Fatal(err)
				}
				for {
					var rec arrow.RecordBatch
					if rec, err = ep.Next(ctx); err != nil {
						break
					}
					got++
					rec.Release()
				}
				ep.Close()
			} else {
				var ep *TensorEpoch
				if ep, err = DialTensor(ctx, srv.cfg.SocketPath); err != nil {
					t.Fatal(err)
				}
				for {
					if _, err = ep.Next(ctx); err != nil {
						break
					}
					got++
				}
				ep.Close()
			}
			if got != 1 || !errors.Is(err, ErrTruncated) {
				t.Fatalf("read %d batches then %v; want 1 batch then ErrTruncated", got, err)
			}
			// Run ends by itself, with the source's error.
			if err := <-runErr; !errors.Is(err, errSourceBroke) || !strings.Contains(err.Error(), "epoch 0") {
				t.Fatalf("Run = %v, want the source's error naming epoch 0", err)
			}
		})
	}
}

// TestCancelUnblocks stops a server whose consumer connected and stopped
// reading, and a client waiting on a server that sends nothing.
func TestCancelUnblocks(t *testing.T) {
	ctx := testCtx(t)
	srv, stop := startServer(t, ServerConfig{Mode: ModeArrow, Epochs: 1, Source: numSource(t, 100, 2000)})
	c, err := net.Dial("unix", srv.cfg.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("condition", func() bool { return srv.Stats().Bytes > 0 }))
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}

	// A server that accepts but never answers (Run not started yet).
	sock := filepath.Join(shortTempDir(t), "feed.sock")
	idle, err := NewServer(ServerConfig{SocketPath: sock, Mode: ModeTensor, Epochs: 1, Source: numSource(t, 1, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := DialTensor(dctx, sock); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("DialTensor on a silent feed: %v, want context.DeadlineExceeded", err)
	}
}

func TestModeMismatch(t *testing.T) { overBoth(t, testModeMismatch) }

func testModeMismatch(t *testing.T, shm bool) {
	ctx := testCtx(t)
	arrowSrv, _ := startServer(t, ServerConfig{Mode: ModeArrow, Epochs: 1, Source: numSource(t, 1, 1), SharedMemory: shm})
	if _, err := DialTensor(ctx, arrowSrv.cfg.SocketPath); !errors.Is(err, ErrBadStream) || !strings.Contains(err.Error(), "DialArrow") {
		t.Fatalf("DialTensor on an arrow feed: %v", err)
	}
	tensorSrv, _ := startServer(t, ServerConfig{Mode: ModeTensor, Epochs: 1, Source: numSource(t, 1, 1), SharedMemory: shm})
	if _, err := DialArrow(ctx, tensorSrv.cfg.SocketPath); !errors.Is(err, ErrBadStream) || !strings.Contains(err.Error(), "DialTensor") {
		t.Fatalf("DialArrow on a tensor feed: %v", err)
	}
}

// TestCutStreamFailsPlainReaders reads a stream the server cut with a
// plain IPC reader, as pyarrow would: it must fail, not end cleanly.
func TestCutStreamFailsPlainReaders(t *testing.T) {
	src := numSource(t, 3, 4)
	src.failAfter = 2
	srv, stop := startServer(t, ServerConfig{Mode: ModeArrow, Epochs: 1, Source: src})
	c, err := net.Dial("unix", srv.cfg.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(c)
	c.Close()
	_ = stop()
	rd, err := ipc.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	n := 0
	for rd.Next() {
		n++
	}
	if n != 2 || rd.Err() == nil {
		t.Fatalf("plain reader read %d batches and then error %v; want 2 and an error", n, rd.Err())
	}
}

// TestClientDetectsMissingEOS serves a stream that stops cleanly between
// two messages, without the end-of-stream marker, as a crashed executor
// would: the client must report ErrTruncated.
func TestClientDetectsMissingEOS(t *testing.T) {
	ctx := testCtx(t)
	var stream bytes.Buffer
	w := ipc.NewWriter(&stream, ipc.WithSchema(withEpoch(numSchema, 0)))
	rec := numBatch(memory.DefaultAllocator, 0, 0, 3)
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	whole := stream.Len() // the marker comes after this
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		data    []byte
		wantErr error
	}{
		{"complete", stream.Bytes(), nil},
		{"no end-of-stream marker", stream.Bytes()[:whole], ErrTruncated},
		{"cut inside a message", stream.Bytes()[:whole-10], ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := serveBytes(t, tc.data)
			ep, err := DialArrow(ctx, sock)
			if err != nil {
				t.Fatal(err)
			}
			defer ep.Close()
			for {
				rec, err := ep.Next(ctx)
				if err != nil {
					if tc.wantErr == nil && !errors.Is(err, io.EOF) || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
						t.Fatalf("Next: %v, want %v", err, tc.wantErr)
					}
					break
				}
				rec.Release()
			}
		})
	}
}

// serveBytes serves data, once, on a fresh socket whose path it returns.
func serveBytes(t *testing.T, data []byte) string {
	t.Helper()
	sock := filepath.Join(shortTempDir(t), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var g errgroup.Group
	g.Go(func() error {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		defer c.Close()
		_, _ = c.Write(data) // the client may hang up first
		return nil
	})
	t.Cleanup(func() {
		ln.Close()
		if err := g.Wait(); err != nil {
			t.Error(err)
		}
	})
	return sock
}

// scribbler is an allocator that overwrites memory as it is freed, as a
// reusing allocator (the feed pipeline's buffer pool) may at any moment.
type scribbler struct{ memory.Allocator }

func (s scribbler) Free(b []byte) {
	for i := range b {
		b[i] = 0xee
	}
	s.Allocator.Free(b)
}

// The arrow writer gathers several small batches into one writev and
// references their buffers in place: each batch must stay alive until the
// writev that sends it, or the consumer reads freed memory.
func TestArrowBatchesLiveUntilSent(t *testing.T) {
	ctx := testCtx(t)
	mem := memory.NewCheckedAllocator(scribbler{memory.NewGoAllocator()})
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	const batches, rows = 300, 200 // 800-byte columns: referenced, many per writev
	src := &memSource{schema: numSchema, failAfter: -1, n: batches, batch: func(epoch, i int) arrow.RecordBatch {
		return numBatch(mem, epoch, i, rows)
	}}
	srv, stop := startServer(t, ServerConfig{Mode: ModeArrow, Epochs: 1, Source: src})
	_, xs := readArrowEpoch(ctx, t, srv.cfg.SocketPath)
	if len(xs) != batches*rows {
		t.Fatalf("%d rows, want %d", len(xs), batches*rows)
	}
	for i, x := range xs {
		if w := float32((i/rows)*1000 + i%rows); x != w {
			t.Fatalf("row %d: x = %v, want %v (a batch was freed before it was sent)", i, x, w)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// A batch goes out as soon as the source has no other ready, however
// small it is: the consumer never waits for a batch the server holds
// while the source is slow with the next one.
func TestArrowSendsWhenSourceIsDry(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	src := &memSource{schema: numSchema, failAfter: -1, n: 3, dry: true, batch: func(epoch, i int) arrow.RecordBatch {
		if i == 1 {
			<-gate // the source is slow until the consumer has batch 0
		}
		return numBatch(mem, epoch, i, 200)
	}}
	srv, stop := startServer(t, ServerConfig{Mode: ModeArrow, Epochs: 1, Source: src})
	t.Cleanup(open) // runs before the server's stop, should the test fail early
	ctx := testCtx(t)
	ep, err := DialArrow(ctx, srv.cfg.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	first, cancel := context.WithTimeout(ctx, testutil.Scale(10*time.Second))
	rec, err := ep.Next(first)
	cancel()
	if err != nil {
		t.Fatalf("first batch while the source is slow: %v", err)
	}
	rec.Release()
	open()
	n := 1
	for {
		rec, err := ep.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rec.Release()
		n++
	}
	ep.Close()
	if n != 3 {
		t.Fatalf("%d batches, want 3", n)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
