package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/internal/testaddr"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/standalone/client"
	"github.com/spindle-ml/spindle/standalone/internal/apierr"
	"github.com/spindle-ml/spindle/standalone/internal/testcluster"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestStatusText(t *testing.T) {
	g := testcluster.StartMasters(t, 3, nil)
	testcluster.StartWorker(t, g.Addrs(), "w1", nil)
	g.WaitWorkers(1)
	c := g.Client()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(60*time.Second))
	defer cancel()
	if err := c.Call(ctx, false, func(ctx context.Context, m pb.MasterClient) error {
		_, err := m.RegisterApp(ctx, &pb.RegisterAppRequest{Name: "nightly-train", RequestId: "r"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	down := (g.Leader() + 1) % 3
	g.Stop(down)
	// Two masters of three elect on loopback in a fraction of a second,
	// but on a loaded machine they may be between leaders for a while
	// (a 150 ms lease missed, a new term): the text is checked on a
	// status taken while one leads, which is what the test is about.
	var st *client.Status
	testutil.WaitFor(t, 20*time.Second, func() error {
		s, err := c.Status(ctx)
		if err != nil {
			return err
		}
		if s.Leader() == "" {
			var buf bytes.Buffer
			_ = s.WriteText(&buf)
			return fmt.Errorf("no master leads in the status:\n%s", buf.String())
		}
		st = s
		return nil
	})
	leader := st.Leader()
	if leader == g.Cfgs[down].ID {
		t.Fatalf("Leader() = %q, the master that was stopped", leader)
	}
	var buf bytes.Buffer
	if err := st.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		leader + " ", "leader", g.Cfgs[down].ID, "unreachable",
		"w1", "alive", "0/4", "nightly-train", "RUNNING", "(no executors)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}

func TestClientErrors(t *testing.T) {
	if _, err := client.New(client.Config{}); !errors.Is(err, client.ErrConfig) {
		t.Fatalf("no masters: %v", err)
	}
	if _, err := client.New(client.Config{Masters: []string{"no-port"}, Secret: testcluster.Secret}); !errors.Is(err, client.ErrConfig) {
		t.Fatalf("bad address: %v", err)
	}
	// Masters that are all down: the call keeps trying until ctx ends and
	// says what the last master said.
	c, err := client.New(client.Config{Masters: []string{testaddr.Refusing(t), testaddr.Refusing(t)}, Secret: testcluster.Secret})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(300*time.Millisecond))
	defer cancel()
	_, err = c.Status(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "last error") {
		t.Fatalf("all masters down: %v", err)
	}
	// A wrong secret is not retried and says what to check.
	g := testcluster.StartMasters(t, 1, nil)
	bad, err := client.New(client.Config{Masters: g.Addrs(), Secret: "some-other-secret-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	ctx2, cancel2 := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
	defer cancel2()
	if _, err := bad.Status(ctx2); err == nil || !strings.Contains(err.Error(), "is the cluster secret the same") || ctx2.Err() != nil {
		t.Fatalf("wrong secret: %v", err)
	}
}

// TestCallKeepsTheAnswerOverItsDeadline: a call that each master refuses
// (here: "answered from its replica") until the caller's deadline ends
// reports that refusal, not the DeadlineExceeded of the attempt the
// deadline cut short.
func TestCallKeepsTheAnswerOverItsDeadline(t *testing.T) {
	c, err := client.New(client.Config{Masters: []string{testaddr.Refusing(t)}, Secret: testcluster.Secret})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(300*time.Millisecond))
	defer cancel()
	deadline, _ := ctx.Deadline()
	attempts := 0
	err = c.Call(ctx, true, func(ctx context.Context, _ pb.MasterClient) error {
		attempts++
		if time.Until(deadline) > 50*time.Millisecond {
			return fmt.Errorf("%w: master m2 (Follower) answered from its replica, which may lag", apierr.ErrNotLeader)
		}
		// The last attempt: gRPC fails it by the clock, here a moment
		// before ctx's timer fires.
		<-time.After(time.Until(deadline) - 10*time.Millisecond)
		return status.Error(codes.DeadlineExceeded, "context deadline exceeded")
	})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "answered from its replica") {
		t.Fatalf("after %d attempts: %v; want the refusal before the deadline", attempts, err)
	}
}

// TestStatusWaitsOutAnElection: asked while no master leads (two of
// three down), Status waits for an election rather than answer with a
// follower's view, which lacks what only the leader knows (applications
// waiting for room, executors localizing): once a second master is back
// and one of them leads, Status answers with the leader's view. It used to
// answer at once with the follower's (standalone/e2e TestRoom saw a
// waiting application as RUNNING under load, while a leader stepped down).
func TestStatusWaitsOutAnElection(t *testing.T) {
	g := testcluster.StartMasters(t, 3, testcluster.FastRaft)
	first := g.Leader()
	g.Stop((first + 1) % 3)
	g.Stop((first + 2) % 3)
	c, err := client.New(client.Config{Masters: g.Addrs(), Secret: testcluster.Secret, AttemptTimeout: 2 * time.Second,
		LeaderWait: testutil.Scale(60 * time.Second), Logger: testcluster.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The one master left steps down once it misses its quorum.
	testutil.WaitFor(t, 20*time.Second, testutil.Holds("the last master to step down", func() bool { return !g.Ms[first].IsLeader() }))
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(90*time.Second))
	defer cancel()
	type answer struct {
		st  *client.Status
		err error
	}
	got := make(chan answer, 1)
	go func() {
		st, err := c.Status(ctx)
		got <- answer{st, err}
	}()
	select {
	case a := <-got:
		t.Fatalf("Status answered while no master led (%v): %+v", a.err, a.st)
	case <-time.After(500 * time.Millisecond):
	}
	g.Start((first + 1) % 3)
	a := <-got
	if a.err != nil {
		t.Fatalf("Status after the election: %v", a.err)
	}
	if a.st.Leader() == "" || a.st.Cluster.GetServedBy().GetState() != "Leader" {
		t.Fatalf("Status after the election: served by %v; want the leader's view", a.st.Cluster.GetServedBy())
	}
}
