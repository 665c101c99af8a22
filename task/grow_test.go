package task

import (
	"context"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/spindle-ml/spindle/collective"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestGrowJoinsANewcomerAtAStepBoundary: a world of 3 runs while the
// driver starts a newcomer for rank 3. Only rank 0's executor has written
// the bigger membership when the ranks reach their step boundary; ranks 1
// and 2 get it only once rank 0 dialled the newcomer, which it does only
// after the ranks agreed to grow. Grow agrees anyway, ranks 1 and 2 wait
// for their own file to name the bigger world, and the three form it with
// the newcomer, keeping their ranks; CatchUp hands the newcomer (step -1)
// the members' step and state.
func TestGrowJoinsANewcomerAtAStepBoundary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	comms, peers, env := joinAll(ctx, t, 3)
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &dialledListener{Listener: tcp, dialled: make(chan struct{})}
	grown := Membership{Version: 1, Peers: append(slices.Clone(peers), ln.Addr().String()), Incarnations: []uint32{0, 0, 0, 1}, Joined: 3}
	heard := Env{WorldSize: 3, MembershipFile: filepath.Join(t.TempDir(), "membership.json")}
	writeMembership(t, heard.MembershipFile, grown)

	next := make([]*collective.Comm, 4)
	g, gctx := errgroup.WithContext(ctx)
	for r, c := range comms {
		e := env
		if r == 0 {
			e = heard
		}
		g.Go(func() error {
			nc, ok, err := e.Grow(gctx, c)
			if err == nil && !ok {
				t.Errorf("rank %d did not grow", r)
			}
			next[r] = nc
			return err
		})
	}
	g.Go(func() (err error) { next[3], err = joinRank(gctx, 3, grown.Peers, ln, grown.Incarnations); return err })
	select {
	case <-ln.dialled:
		writeMembership(t, env.MembershipFile, grown)
	case <-gctx.Done():
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range next {
			if c != nil {
				c.Close()
			}
		}
	}()
	if t.Failed() {
		return
	}

	got := make([]int64, 4)
	states := make([][]float64, 4)
	g, gctx = errgroup.WithContext(ctx)
	for r, c := range next {
		if c.Rank() != r || c.WorldSize() != 4 {
			t.Fatalf("rank %d is rank %d of %d after growing, want rank %d of 4", r, c.Rank(), c.WorldSize(), r)
		}
		step, state := int64(7), []float64{42}
		if r == 3 {
			step, state = -1, []float64{0}
		}
		states[r] = state
		g.Go(func() (err error) { got[r], err = CatchUp(gctx, c, step, states[r]); return err })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for r := range next {
		if got[r] != 7 || states[r][0] != 42 {
			t.Errorf("rank %d caught up to step %d with %v, want step 7 and [42]", r, got[r], states[r])
		}
	}
}

// TestGrowWithoutNewcomersKeepsTheWorld: with no bigger membership, Grow
// returns the same communicator, which goes on working.
func TestGrowWithoutNewcomersKeepsTheWorld(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	comms, _, env := joinAll(ctx, t, 2)
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	g, gctx := errgroup.WithContext(ctx)
	for r, c := range comms {
		g.Go(func() error {
			nc, ok, err := env.Grow(gctx, c)
			if err != nil {
				return err
			}
			if ok || nc != c {
				t.Errorf("rank %d grew without a bigger membership", r)
			}
			return collective.AllReduce(gctx, c, []float64{1}, collective.Sum)
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// dialledListener closes dialled once a peer connected to it.
type dialledListener struct {
	net.Listener
	once    sync.Once
	dialled chan struct{}
}

func (l *dialledListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.once.Do(func() { close(l.dialled) })
	}
	return c, err
}
