package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/spindle-ml/spindle/collective"
	"github.com/spindle-ml/spindle/internal/testutil"
)

const membershipTestToken = "0123456789abcdef0123456789abcdef"

// joinRank joins rank of a communicator over peers on ln, in incarnations.
func joinRank(ctx context.Context, rank int, peers []string, ln net.Listener, incarnations []uint32) (*collective.Comm, error) {
	cfg := collective.DefaultConfig()
	cfg.Rank, cfg.WorldSize, cfg.Peers, cfg.Listener = rank, len(peers), peers, ln
	cfg.JobID, cfg.Token, cfg.Incarnations = "membership-test", membershipTestToken, incarnations
	cfg.Timeout = testutil.Scale(10 * time.Second)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return collective.New(ctx, cfg)
}

// listeners binds n loopback peer ports.
func listeners(t *testing.T, n int) ([]net.Listener, []string) {
	t.Helper()
	lns := make([]net.Listener, n)
	peers := make([]string, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i], peers[i] = ln, ln.Addr().String()
	}
	return lns, peers
}

// joinAll joins n ranks of a communicator on loopback ports, and returns
// them, their peer addresses, and the Env of a job whose membership file
// names them, every rank in its first incarnation.
func joinAll(ctx context.Context, t *testing.T, n int) ([]*collective.Comm, []string, Env) {
	t.Helper()
	lns, peers := listeners(t, n)
	comms := make([]*collective.Comm, n)
	g, gctx := errgroup.WithContext(ctx)
	for r := range n {
		g.Go(func() (err error) { comms[r], err = joinRank(gctx, r, peers, lns[r], nil); return err })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "membership.json")
	writeMembership(t, path, Membership{Peers: peers, Incarnations: make([]uint32, n)})
	return comms, peers, Env{WorldSize: n, MembershipFile: path}
}

// awaitRejoin has the survivors of comms fail an allreduce on rank lost
// and call Env.Rejoin, each survivors[i] putting its new communicator in
// out[i]; it returns once every survivor waits for the new membership,
// with the function that waits for them to rejoin.
func awaitRejoin(ctx context.Context, env Env, comms []*collective.Comm, survivors []int, lost int, out []*collective.Comm) func() error {
	waiting := make(chan struct{}, len(survivors))
	g, gctx := errgroup.WithContext(ctx)
	for i, r := range survivors {
		g.Go(func() error {
			err := collective.AllReduce(gctx, comms[r], make([]float64, 8), collective.Sum)
			if got, ok := collective.LostRank(err); !ok || got != lost {
				return errors.Join(fmt.Errorf("the allreduce did not name rank %d", lost), err)
			}
			waiting <- struct{}{}
			c, err := env.Rejoin(gctx, comms[r], err)
			out[i] = c
			return err
		})
	}
	for range survivors {
		select {
		case <-waiting:
		case <-gctx.Done(): // a survivor failed: g.Wait says why
			return g.Wait
		}
	}
	return g.Wait
}

// writeMembership writes m where the executor would, atomically.
func writeMembership(t *testing.T, path string, m Membership) {
	t.Helper()
	b, _ := json.Marshal(m)
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// rank2Replacement binds the port of rank 2's replacement and returns
// the membership that names it, in its next incarnation.
func rank2Replacement(t *testing.T, peers []string) (Membership, net.Listener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	moved := slices.Clone(peers)
	moved[2] = ln.Addr().String()
	return Membership{Version: 1, Peers: moved, Incarnations: []uint32{0, 0, 1}, Joined: 2}, ln
}

// replaceRank2 starts rank 2's replacement on a new port, in its next
// incarnation, once the membership file at path names it, as the executor
// writes it.
func replaceRank2(ctx context.Context, t *testing.T, path string, peers []string) *collective.Comm {
	t.Helper()
	m, ln := rank2Replacement(t, peers)
	writeMembership(t, path, m)
	c, err := joinRank(ctx, 2, m.Peers, ln, m.Incarnations)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRejoinAndCatchUp: rank 2 of 3 goes away; the survivors' allreduce
// names it, they wait in Env.Rejoin until the membership file names
// rank 2's next incarnation on a new port, rejoin it, and CatchUp hands
// everyone the state of the survivor that got furthest.
func TestRejoinAndCatchUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	comms, peers, env := joinAll(ctx, t, 3)
	comms[2].Close() // lost: no operation in flight, so no notice says why
	path := env.MembershipFile

	// The survivors fail on rank 2 and wait for its replacement.
	rejoined := awaitRejoin(ctx, env, comms, []int{0, 1}, 2, comms)
	comms[2] = replaceRank2(ctx, t, path, peers)
	if err := rejoined(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()

	// Rank 1 completed one step more than rank 0: its state wins.
	steps := []int64{5, 6, -1}
	states := make([][]float64, 3)
	got := make([]int64, 3)
	g, gctx := errgroup.WithContext(ctx)
	for r := range 3 {
		states[r] = []float64{float64(r), float64(10 * r)}
		g.Go(func() (err error) { got[r], err = CatchUp(gctx, comms[r], steps[r], states[r]); return err })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for r := range 3 {
		if got[r] != 6 || !slices.Equal(states[r], []float64{1, 10}) {
			t.Errorf("rank %d caught up to step %d with %v, want rank 1's step 6 and state [1 10]", r, got[r], states[r])
		}
	}
}

// TestRejoinPassesOtherFailuresOn: a failure that lost no rank, or a job
// without a membership file, is returned as it is.
func TestRejoinPassesOtherFailuresOn(t *testing.T) {
	boom := errors.New("boom")
	if _, err := (Env{MembershipFile: "x"}).Rejoin(context.Background(), nil, boom); err != boom {
		t.Fatalf("got %v, want the failure itself", err)
	}
	if _, err := (Env{}).Membership(); !errors.Is(err, ErrNoMembership) {
		t.Fatalf("got %v, want ErrNoMembership", err)
	}
}

// joined is one rank's Env.join.
type joined struct {
	rank int
	comm *collective.Comm
	err  error
}

// lostWhileJoining has ranks 0 and 1 of 3 join with envs[0] and envs[1]
// (Env.join), logging to logs, while rank 2's port accepts and never says
// a word: its process is lost before the communicator formed. It writes
// every rank's first membership to the envs' files and returns once both
// survivors reached rank 2's port, with the peers and where the joins
// end; the test's cleanup waits for them.
func lostWhileJoining(ctx context.Context, t *testing.T, envs [2]Env, logs [2]*slog.Logger) ([]string, <-chan joined) {
	t.Helper()
	lns, peers := listeners(t, 3)
	dead := lns[2]
	t.Cleanup(func() { dead.Close() })
	reached := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := dead.Accept()
			if err != nil {
				return
			}
			reached <- c
		}
	}()
	for _, env := range envs {
		writeMembership(t, env.MembershipFile, Membership{Peers: peers, Incarnations: []uint32{0, 0, 0}})
	}
	out := make(chan joined, 2)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	for r, env := range envs {
		cfg := collective.DefaultConfig()
		cfg.Rank, cfg.WorldSize, cfg.Peers, cfg.Listener = r, 3, peers, lns[r]
		cfg.JobID, cfg.Token, cfg.Logger = "membership-test", membershipTestToken, logs[r]
		// A survivor that gives up tells the other one: a loaded machine
		// must not lose that notice.
		cfg.Timeout = testutil.Scale(10 * time.Second)
		cfg.NoticeTimeout = cfg.Timeout
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := env.join(ctx, cfg)
			out <- joined{rank: r, comm: c, err: err}
		}()
	}
	for range 2 {
		select {
		case c := <-reached:
			t.Cleanup(func() { c.Close() })
		case j := <-out:
			t.Fatalf("rank %d's join ended before it reached rank 2: %v", j.rank, j.err)
		}
	}
	return peers, out
}

// collectJoins puts the two survivors' communicators from joins in comms.
func collectJoins(t *testing.T, joins <-chan joined, comms []*collective.Comm) {
	t.Helper()
	var errs []error
	for range 2 {
		j := <-joins
		comms[j.rank] = j.comm
		if j.err != nil {
			errs = append(errs, fmt.Errorf("rank %d: %w", j.rank, j.err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// allReduceReplaced checks that every rank's communicator says a rank was
// replaced, and that they allreduce together.
func allReduceReplaced(ctx context.Context, t *testing.T, comms []*collective.Comm) {
	t.Helper()
	g, gctx := errgroup.WithContext(ctx)
	for r := range comms {
		if !Replaced(comms[r]) {
			t.Errorf("rank %d's communicator does not say a rank was replaced: %v", r, comms[r].Incarnations())
		}
		g.Go(func() error { return collective.AllReduce(gctx, comms[r], []float64{1}, collective.Sum) })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// rank2LostWhileJoining is lostWhileJoining with one membership file for
// both survivors: it returns the test's context, that file, the peers,
// where the joins end, and the communicators the test fills in, which
// its end closes.
func rank2LostWhileJoining(t *testing.T) (context.Context, string, []string, <-chan joined, []*collective.Comm) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	path := filepath.Join(t.TempDir(), "membership.json")
	env := Env{WorldSize: 3, MembershipFile: path}
	comms := make([]*collective.Comm, 3)
	t.Cleanup(func() {
		for _, c := range comms {
			if c != nil {
				c.Close()
			}
		}
	})
	peers, joins := lostWhileJoining(ctx, t, [2]Env{env, env}, [2]*slog.Logger{discardLogger, discardLogger})
	// Before lostWhileJoining's cleanup waits for the joins.
	t.Cleanup(cancel)
	return ctx, path, peers, joins, comms
}

// TestCommJoinsAReplacementWhileJoining: rank 2 of 3 is lost before the
// communicator formed (ranks 0 and 1 reached its old port, which never
// answers); once the membership names its replacement on a new port,
// the survivors join again with it, long before the connect timeout, and
// the communicator they get says a rank was replaced.
func TestCommJoinsAReplacementWhileJoining(t *testing.T) {
	ctx, path, peers, joins, comms := rank2LostWhileJoining(t)
	comms[2] = replaceRank2(ctx, t, path, peers)
	collectJoins(t, joins, comms)
	allReduceReplaced(ctx, t, comms)
}

// TestCommWaitsForItsMembershipAfterAPeerGaveUp: each executor writes
// its own process's membership, when it hears of the replacement. Rank
// 0's names rank 2's replacement first, so rank 0 gives up its join, and
// its failure notice, which blames the lost rank 2, fails rank 1's join
// while rank 1's membership is still the old one: rank 1 waits for its
// membership to name the replacement, rather than giving up, and the
// three ranks form the communicator.
func TestCommWaitsForItsMembershipAfterAPeerGaveUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	dir := t.TempDir()
	envs := [2]Env{
		{WorldSize: 3, MembershipFile: filepath.Join(dir, "rank0.json")},
		{WorldSize: 3, MembershipFile: filepath.Join(dir, "rank1.json")},
	}
	waiting := &signalHandler{prefix: "a rank was lost while the ranks joined", seen: make(chan struct{})}
	peers, joins := lostWhileJoining(ctx, t, envs, [2]*slog.Logger{discardLogger, slog.New(waiting)})
	comms := make([]*collective.Comm, 3)
	defer func() {
		for _, c := range comms {
			if c != nil {
				c.Close()
			}
		}
	}()

	m, ln := rank2Replacement(t, peers)
	writeMembership(t, envs[0].MembershipFile, m)
	replaced := make(chan joined, 1)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := joinRank(ctx, 2, m.Peers, ln, m.Incarnations)
		replaced <- joined{rank: 2, comm: c, err: err}
	}()
	select {
	case <-waiting.seen:
	case j := <-joins:
		comms[j.rank] = j.comm
		t.Fatalf("rank %d's join ended before its membership named rank 2's replacement: %v", j.rank, j.err)
	case <-ctx.Done():
		t.Fatal("rank 1 never learnt, from rank 0, that rank 2 was lost")
	}
	writeMembership(t, envs[1].MembershipFile, m)
	collectJoins(t, joins, comms)
	j := <-replaced
	if comms[2] = j.comm; j.err != nil {
		t.Fatal(j.err)
	}
	allReduceReplaced(ctx, t, comms)
}

// signalHandler is a log handler that closes seen at the first record
// whose message starts with prefix.
type signalHandler struct {
	prefix string
	seen   chan struct{}
	once   sync.Once
}

func (h *signalHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *signalHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}

func (h *signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *signalHandler) WithGroup(string) slog.Handler      { return h }
