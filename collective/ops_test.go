package collective

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/spindle-ml/spindle/internal/testutil"
)

func quietLogger() *slog.Logger {
	if os.Getenv("COLLECTIVE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// inputs returns rank r's input: values of mixed magnitude and sign, so
// that the order of additions changes the rounded result and a
// nondeterministic order would show.
func inputs[T Float](r, count int) []T {
	rng := rand.New(rand.NewPCG(uint64(r), uint64(count)))
	out := make([]T, count)
	for i := range out {
		out[i] = T((rng.Float64() - 0.5) * math.Pow(10, float64(rng.IntN(8))))
	}
	return out
}

// ringReference computes what the ring allreduce must produce, bit for
// bit: element i of block k is reduced starting at rank k and going round
// the ring, in T's precision, and divided by n in the last step for Mean.
func ringReference[T Float](in [][]T, op Op) []T {
	n := len(in)
	count := len(in[0])
	out := make([]T, count)
	for k := range n {
		lo, hi := segment(k, n, count, 1)
		for i := lo; i < hi; i++ {
			acc := in[k][i]
			for j := 1; j < n; j++ {
				x := in[(k+j)%n][i]
				if j == n-1 && op == Mean {
					acc = (acc + x) / T(n)
				} else {
					acc += x
				}
			}
			out[i] = acc
		}
	}
	return out
}

func TestAllReduce(t *testing.T) {
	for n := 1; n <= 5; n++ {
		t.Run(fmt.Sprintf("world=%d", n), func(t *testing.T) {
			// A small chunk, so that even modest sizes run many pipelined
			// chunks per step, with partial chunks at segment ends; the ring
			// for every size (tree_test.go covers the other algorithm).
			comms := cluster(t, n, func(_ int, cfg *Config) {
				cfg.ChunkBytes = 1000
				cfg.SmallBytes = -1
			})
			sizes := []int{0, 1, 2, n - 1, n + 1, 1009, 3*n*1000 + 7, 1<<18 + 3}
			if testutil.RaceDetector {
				// 3*n*1000+7 values already run a dozen full chunks
				// and a partial one per step; the largest size
				// (about 1,000 chunks a step) is half the package's
				// time under -race and runs without the detector
				// (RACE_SAMPLED_TESTS).
				sizes = sizes[:len(sizes)-1]
			}
			for _, count := range sizes {
				for _, op := range []Op{Sum, Mean} {
					t.Run(fmt.Sprintf("float32/n=%d/%s", count, op), func(t *testing.T) {
						checkAllReduce[float32](t, comms, count, op)
					})
					t.Run(fmt.Sprintf("float64/n=%d/%s", count, op), func(t *testing.T) {
						checkAllReduce[float64](t, comms, count, op)
					})
				}
			}
		})
	}
}

// TestAllReduceLarge runs a 16 MiB tensor with the default chunk size, so
// that segments span many full chunks.
func TestAllReduceLarge(t *testing.T) {
	count := 1<<21 + 5
	if testutil.RaceDetector {
		// 8 MiB under -race: each rank's segment is still two full
		// chunks and a partial one; the 16 MiB run is left to the
		// run without the detector (RACE_SAMPLED_TESTS).
		count = 1<<20 + 5
	}
	comms := cluster(t, 3, nil)
	checkAllReduce[float64](t, comms, count, Mean)
}

func checkAllReduce[T Float](t *testing.T, comms []*Comm, count int, op Op) {
	t.Helper()
	n := len(comms)
	in := make([][]T, n)
	bufs := make([][]T, n)
	for r := range n {
		in[r] = inputs[T](r, count)
		bufs[r] = append([]T(nil), in[r]...)
	}
	ctx := context.Background()
	mustAll(t, onAll(t, comms, func(c *Comm) error {
		return AllReduce(ctx, c, bufs[c.Rank()], op)
	}))
	want := ringReference(in, op)
	var zero T
	if a := comms[0].allReduceAlgo(count * int(unsafe.Sizeof(zero))); a == algoTree || a == algoHost {
		// The host segment reduces in the tree's order.
		want = treeReference(in, op)
	}
	for r := range n {
		for i := range want {
			if math.Float64bits(float64(bufs[r][i])) != math.Float64bits(float64(want[i])) {
				t.Fatalf("rank %d element %d = %v, want %v (bits differ)", r, i, bufs[r][i], want[i])
			}
		}
	}
	// The reference itself must be the right reduction, not just agree
	// with the implementation's order.
	eps := math.Pow(2, -53)
	if _, ok := any(zero).(float32); ok {
		eps = math.Pow(2, -24)
	}
	for i := range want {
		var exact, sumAbs float64
		for r := range n {
			exact += float64(in[r][i])
			sumAbs += math.Abs(float64(in[r][i]))
		}
		if op == Mean {
			exact /= float64(n)
			sumAbs /= float64(n)
		}
		if d := math.Abs(float64(want[i]) - exact); d > 2*float64(n)*eps*sumAbs {
			t.Fatalf("element %d = %v, exact %v", i, want[i], exact)
		}
	}
}

func TestAllReduceRejectsUnknownOp(t *testing.T) {
	comms := cluster(t, 1, nil)
	err := AllReduce(context.Background(), comms[0], []float32{1}, Op(9))
	if err == nil {
		t.Fatal("AllReduce with Op(9) succeeded")
	}
}

func TestBroadcast(t *testing.T) {
	for n := 1; n <= 5; n++ {
		t.Run(fmt.Sprintf("world=%d", n), func(t *testing.T) {
			comms := cluster(t, n, func(_ int, cfg *Config) { cfg.ChunkBytes = 64 })
			for root := range n {
				for _, count := range []int{0, 1, 100, 4099} {
					t.Run(fmt.Sprintf("root=%d/n=%d", root, count), func(t *testing.T) {
						want := make([]int32, count)
						for i := range want {
							want[i] = int32(i*31 + root)
						}
						bufs := make([][]int32, n)
						for r := range n {
							bufs[r] = make([]int32, count)
							if r == root {
								copy(bufs[r], want)
							} else {
								for i := range bufs[r] {
									bufs[r][i] = -1
								}
							}
						}
						mustAll(t, onAll(t, comms, func(c *Comm) error {
							return Broadcast(context.Background(), c, bufs[c.Rank()], root)
						}))
						for r := range n {
							for i := range want {
								if bufs[r][i] != want[i] {
									t.Fatalf("rank %d element %d = %d, want %d", r, i, bufs[r][i], want[i])
								}
							}
						}
					})
				}
			}
			if err := Broadcast(context.Background(), comms[0], []byte{1}, n); err == nil {
				t.Fatalf("broadcast from root %d of %d succeeded", n, n)
			}
		})
	}
}

func TestAllGather(t *testing.T) {
	for n := 1; n <= 5; n++ {
		t.Run(fmt.Sprintf("world=%d", n), func(t *testing.T) {
			comms := cluster(t, n, func(_ int, cfg *Config) { cfg.ChunkBytes = 48 })
			for _, m := range []int{0, 1, 37, 1000} {
				t.Run(fmt.Sprintf("per-rank=%d", m), func(t *testing.T) {
					recv := make([][]float64, n)
					mustAll(t, onAll(t, comms, func(c *Comm) error {
						send := make([]float64, m)
						for i := range send {
							send[i] = float64(c.Rank()*10000 + i)
						}
						recv[c.Rank()] = make([]float64, n*m)
						return AllGather(context.Background(), c, send, recv[c.Rank()])
					}))
					for r := range n {
						for src := range n {
							for i := range m {
								if got, want := recv[r][src*m+i], float64(src*10000+i); got != want {
									t.Fatalf("rank %d: block %d element %d = %v, want %v", r, src, i, got, want)
								}
							}
						}
					}
				})
			}
			if n > 1 {
				err := AllGather(context.Background(), comms[0], []byte{1}, make([]byte, n+1))
				if err == nil {
					t.Fatal("allgather into a wrongly sized buffer succeeded")
				}
			}
		})
	}
}

func TestBarrier(t *testing.T) {
	const n = 4
	comms := cluster(t, n, nil)
	var lateEntered atomic.Bool
	var early atomic.Int32
	mustAll(t, onAll(t, comms, func(c *Comm) error {
		if c.Rank() == n-1 {
			// Enter late: a barrier that let the others through without this
			// rank would show as a rank leaving before the flag is set. The
			// pause only gives a broken barrier the chance to fail.
			time.Sleep(50 * time.Millisecond)
			lateEntered.Store(true)
		}
		if err := c.Barrier(context.Background()); err != nil {
			return err
		}
		if !lateEntered.Load() {
			early.Add(1)
		}
		return nil
	}))
	if e := early.Load(); e > 0 {
		t.Fatalf("%d ranks left the barrier before the last rank entered it", e)
	}
}

func TestSingleRank(t *testing.T) {
	comms := cluster(t, 1, nil)
	ctx := context.Background()
	data := []float64{1.5, -2}
	if err := AllReduce(ctx, comms[0], data, Mean); err != nil || data[0] != 1.5 || data[1] != -2 {
		t.Fatalf("allreduce of one rank: %v, %v", data, err)
	}
	recv := make([]float64, 2)
	if err := AllGather(ctx, comms[0], data, recv); err != nil || recv[0] != 1.5 {
		t.Fatalf("allgather of one rank: %v, %v", recv, err)
	}
	if err := comms[0].Barrier(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestMismatchedCalls(t *testing.T) {
	tests := []struct {
		name string
		call func(c *Comm) error
	}{
		{"length", func(c *Comm) error {
			return AllReduce(context.Background(), c, make([]float32, 100+c.Rank()/2), Sum)
		}},
		{"element type", func(c *Comm) error {
			if c.Rank() == 1 {
				return AllReduce(context.Background(), c, make([]float64, 100), Sum)
			}
			return AllReduce(context.Background(), c, make([]float32, 100), Sum)
		}},
		{"operation", func(c *Comm) error {
			if c.Rank() == 2 {
				return Broadcast(context.Background(), c, make([]float32, 100), 0)
			}
			return AllReduce(context.Background(), c, make([]float32, 100), Sum)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			comms := cluster(t, 3, nil)
			errs := onAll(t, comms, tc.call)
			for r, err := range errs {
				if !errors.Is(err, ErrMismatch) {
					t.Errorf("rank %d: got %v, want an error wrapping ErrMismatch", r, err)
				}
			}
			// A failed communicator stays failed.
			if err := comms[0].Barrier(context.Background()); err == nil {
				t.Error("barrier after a mismatch succeeded")
			}
		})
	}
}

func TestClosedComm(t *testing.T) {
	comms := cluster(t, 2, nil)
	comms[0].Close()
	if err := comms[0].Barrier(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("barrier on a closed communicator: %v, want ErrClosed", err)
	}
	if err := comms[0].Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestCancelledContextBeforeStart(t *testing.T) {
	comms := cluster(t, 2, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := comms[0].Barrier(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("barrier with a cancelled context: %v", err)
	}
	// Nothing was sent, so the communicator still works.
	mustAll(t, onAll(t, comms, func(c *Comm) error { return c.Barrier(context.Background()) }))
}

// countingTransport wraps a Transport and counts the bytes it moves.
type countingTransport struct {
	Transport
	sent, received atomic.Int64
	sends          atomic.Int64 // Send calls: messages
}

func (c *countingTransport) Send(ctx context.Context, peer int, p []byte) error {
	c.sent.Add(int64(len(p)))
	c.sends.Add(1)
	return c.Transport.Send(ctx, peer, p)
}

func (c *countingTransport) Recv(ctx context.Context, peer int, p []byte) error {
	c.received.Add(int64(len(p)))
	return c.Transport.Recv(ctx, peer, p)
}

// TestNewWithTransport runs a communicator over a Transport it did not
// build, and checks that the ring moves the bandwidth-optimal
// 2(n-1)/n of the tensor per rank.
func TestNewWithTransport(t *testing.T) {
	const n, count = 4, 4000
	base := cluster(t, n, nil)
	comms := make([]*Comm, n)
	wrapped := make([]*countingTransport, n)
	for r := range n {
		wrapped[r] = &countingTransport{Transport: base[r].t}
		c, err := NewWithTransport(Config{Rank: r, WorldSize: n}, wrapped[r])
		if err != nil {
			t.Fatal(err)
		}
		comms[r] = c
	}
	bufs := make([][]float32, n)
	mustAll(t, onAll(t, comms, func(c *Comm) error {
		bufs[c.Rank()] = inputs[float32](c.Rank(), count)
		return AllReduce(context.Background(), c, bufs[c.Rank()], Sum)
	}))
	for r := range n {
		if math.Float32bits(bufs[r][17]) != math.Float32bits(bufs[0][17]) {
			t.Fatalf("rank %d differs from rank 0", r)
		}
		want := int64(2*(n-1)*count/n*4 + headerLen)
		if got := wrapped[r].sent.Load(); got != want {
			t.Fatalf("rank %d sent %d bytes, want %d", r, got, want)
		}
	}
	if _, err := NewWithTransport(Config{Rank: 0, WorldSize: 2}, nil); err == nil {
		t.Fatal("NewWithTransport with a nil transport succeeded")
	}
}
