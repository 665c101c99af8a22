package driver

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/testutil"
)

func register(t *testing.T, g *roster, id, host string) *member {
	t.Helper()
	m, err := g.register(&driverpb.RegisterRequest{ExecutorId: id, Host: host, Ports: []uint32{1, 2}})
	if err != nil {
		t.Fatalf("register %s: %v", id, err)
	}
	return m
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestGangRanksFollowExecutorOrder(t *testing.T) {
	g := newRoster([]string{"exec-0", "exec-1", "exec-2"})
	register(t, g, "exec-2", "h2")
	register(t, g, "exec-0", "h1")
	if closed(g.ready) {
		t.Fatal("ready before the whole gang registered")
	}
	if !strings.Contains(g.missing(), "missing exec-1") {
		t.Errorf("missing = %q", g.missing())
	}
	m1 := register(t, g, "exec-1", "h1")
	if !closed(g.ready) {
		t.Fatal("not ready after every executor registered")
	}
	if m1.rank != 1 || len(g.peers) != 3 || g.peers[2].GetHost() != "h2" {
		t.Fatalf("rank %d, peers %v", m1.rank, g.peers)
	}
	if local, size := g.localRanks(m1); local != 1 || size != 2 {
		t.Errorf("local rank %d of %d, want 1 of 2", local, size)
	}
	if _, err := g.register(&driverpb.RegisterRequest{ExecutorId: "intruder"}); err == nil {
		t.Error("an unknown executor registered")
	}
}

func TestGangFailureNamesRankHostAndStderr(t *testing.T) {
	g := newRoster([]string{"exec-0", "exec-1"})
	register(t, g, "exec-0", "h0")
	register(t, g, "exec-1", "h1")
	if err := g.exit(&driverpb.ExitReport{ExecutorId: "exec-1", ExitCode: 3, StderrTail: "Traceback\nValueError: bad"}); err != nil {
		t.Fatal(err)
	}
	if !closed(g.failed) {
		t.Fatal("a non-zero exit did not fail the job")
	}
	msg := g.err().Error()
	for _, want := range []string{"rank 1", "host h1", "status 3", "ValueError: bad"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	hb, _ := g.heartbeat("exec-0", nil, 0)
	if !hb.GetStop() || hb.GetFinished() || !strings.Contains(hb.GetReason(), "rank 1") {
		t.Errorf("heartbeat after failure: %v", hb)
	}
}

func TestGangSignalAndLost(t *testing.T) {
	g := newRoster([]string{"exec-0", "exec-1"})
	register(t, g, "exec-0", "h0")
	register(t, g, "exec-1", "h1")
	_ = g.exit(&driverpb.ExitReport{ExecutorId: "exec-0", ExitCode: -1, Signal: "SIGKILL"})
	if !strings.Contains(g.err().Error(), "killed by signal SIGKILL") {
		t.Errorf("err = %v", g.err())
	}

	g = newRoster([]string{"exec-0", "exec-1"})
	g.silenceGrace = time.Millisecond // no cluster manager to explain it
	register(t, g, "exec-0", "h0")
	register(t, g, "exec-1", "h1")
	now := time.Now()
	g.now = func() time.Time { return now.Add(10 * time.Second) }
	_, _ = g.heartbeat("exec-0", nil, 0)
	g.checkHeartbeats(5 * time.Second)
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("failure", func() bool { return closed(g.failed) }))
	if err := g.err(); err == nil || !strings.Contains(err.Error(), "rank 1 (host h1") || !strings.Contains(err.Error(), "no heartbeat") {
		t.Fatalf("silent executor not declared lost: %v", err)
	}
}

// TestHeldUpDriverForgivesTheSilence: the driver's checks held up for 6 s
// (its host starved it) move every last heartbeat that much later, so an
// executor silent for 10 s, 6 of them the driver's own, is not lost with
// a 5 s timeout; one silent for longer than the timeout after that is.
func TestHeldUpDriverForgivesTheSilence(t *testing.T) {
	g := newRoster([]string{"exec-0", "exec-1"})
	g.silenceGrace = time.Millisecond
	register(t, g, "exec-0", "h0")
	register(t, g, "exec-1", "h1")
	now := time.Now()
	g.now = func() time.Time { return now.Add(10 * time.Second) }
	g.forgive(6 * time.Second)
	g.checkHeartbeats(5 * time.Second)
	for id, m := range g.members {
		if m.silent {
			t.Errorf("%s declared silent for the 4 s the driver heard it not, against a 5 s timeout", id)
		}
	}
	g.now = func() time.Time { return now.Add(16 * time.Second) }
	g.checkHeartbeats(5 * time.Second)
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("failure", func() bool { return closed(g.failed) }))
	if err := g.err(); err == nil || !strings.Contains(err.Error(), "no heartbeat") {
		t.Fatalf("an executor silent past the timeout after the forgiven stall was not declared lost: %v", err)
	}
}

func TestGangExecutorGoneBeforeRegistering(t *testing.T) {
	g := newRoster([]string{"exec-0", "exec-1"})
	g.executorGone(Event{ExecutorID: "exec-1", Kind: ExecutorExited, ExitCode: 2, Host: "w3"})
	if err := g.err(); err == nil || !strings.Contains(err.Error(), "executor exec-1 exited with status 2 before registering") {
		t.Fatalf("err = %v", err)
	}
}

func TestGangSuccess(t *testing.T) {
	g := newRoster([]string{"exec-0", "exec-1"})
	register(t, g, "exec-0", "h0")
	register(t, g, "exec-1", "h0")
	_ = g.exit(&driverpb.ExitReport{ExecutorId: "exec-0"})
	if closed(g.succeeded) {
		t.Fatal("succeeded with one rank still running")
	}
	_ = g.exit(&driverpb.ExitReport{ExecutorId: "exec-1", Progress: &driverpb.Progress{Rows: 7}})
	if !closed(g.succeeded) || g.err() != nil {
		t.Fatal("not succeeded after every rank exited 0")
	}
	// The executor processes ending afterwards is no failure.
	g.executorGone(Event{ExecutorID: "exec-0", Kind: ExecutorExited})
	if g.err() != nil {
		t.Fatalf("clean executor exit failed the job: %v", g.err())
	}
	if s := g.snapshot(); s[1].rows != 7 || !s[1].exited {
		t.Errorf("snapshot = %+v", s)
	}
}

// rolesRoster is a registered job of a chief (when chief), two workers and
// one parameter server.
func rolesRoster(t *testing.T, chief bool) *roster {
	t.Helper()
	cfg := Config{NumExecutors: 2, Cores: 1, MemoryMB: 1, Chief: chief, PS: RoleSpec{Count: 1, Cores: 1, MemoryMB: 1}}
	g := newRosterOf(layout(cfg.Roles()))
	for i := range g.order {
		register(t, g, fmt.Sprintf("exec-%d", i), fmt.Sprintf("h%d", i))
	}
	return g
}

func TestRolesRankOrderAndPeers(t *testing.T) {
	g := rolesRoster(t, true)
	var got []string
	for _, p := range g.peers {
		got = append(got, fmt.Sprintf("%d:%s/%d", p.GetRank(), p.GetRole(), p.GetRoleRank()))
	}
	if want := "0:chief/0 1:worker/0 2:worker/1 3:ps/0"; strings.Join(got, " ") != want {
		t.Fatalf("peers %s, want %s", strings.Join(got, " "), want)
	}
}

// The job's end is decided by the chief, or without one by the workers;
// parameter servers are then stopped, and their end is no failure.
func TestRolesJobEnd(t *testing.T) {
	exit0 := func(g *roster, id string) { _ = g.exit(&driverpb.ExitReport{ExecutorId: id}) }
	t.Run("workers decide without a chief", func(t *testing.T) {
		g := rolesRoster(t, false) // exec-0, exec-1 workers; exec-2 ps
		exit0(g, "exec-0")
		if closed(g.succeeded) {
			t.Fatal("succeeded with a worker still running")
		}
		exit0(g, "exec-1")
		if !closed(g.succeeded) || g.err() != nil {
			t.Fatalf("not succeeded after both workers exited 0: %v", g.err())
		}
		if got := g.running(); fmt.Sprint(got) != "[ps 0]" {
			t.Fatalf("running %v, want [ps 0]", got)
		}
		hb, _ := g.heartbeat("exec-2", nil, 0)
		if !hb.GetStop() || !hb.GetFinished() {
			t.Fatalf("the ps was not told the job finished: %v", hb)
		}
		// Stopped by SIGTERM: not a failure.
		_ = g.exit(&driverpb.ExitReport{ExecutorId: "exec-2", ExitCode: -1, Signal: "terminated"})
		g.executorGone(Event{ExecutorID: "exec-2", Kind: ExecutorExited, ExitCode: 1})
		if g.err() != nil || !closed(g.allExited) || fmt.Sprint(g.stoppedAtEnd()) != "[ps 0]" {
			t.Fatalf("err %v, all exited %v, stopped %v", g.err(), closed(g.allExited), g.stoppedAtEnd())
		}
	})
	t.Run("the chief decides", func(t *testing.T) {
		g := rolesRoster(t, true) // exec-0 chief; exec-1, exec-2 workers; exec-3 ps
		exit0(g, "exec-1")
		if closed(g.succeeded) {
			t.Fatal("a worker ended the job although there is a chief")
		}
		exit0(g, "exec-0")
		if !closed(g.succeeded) || g.err() != nil {
			t.Fatalf("not succeeded after the chief exited 0: %v", g.err())
		}
		if got := g.running(); fmt.Sprint(got) != "[worker 1 ps 0]" {
			t.Fatalf("running %v, want [worker 1 ps 0]", got)
		}
		// Released without reporting: not a failure either.
		g.executorGone(Event{ExecutorID: "exec-2", Kind: ExecutorLost})
		g.executorGone(Event{ExecutorID: "exec-3", Kind: ExecutorExited, ExitCode: 1})
		if g.err() != nil || !closed(g.allExited) {
			t.Fatalf("err %v, all exited %v", g.err(), closed(g.allExited))
		}
	})
	t.Run("a ps that dies early fails the job", func(t *testing.T) {
		g := rolesRoster(t, true)
		_ = g.exit(&driverpb.ExitReport{ExecutorId: "exec-3", ExitCode: 1, StderrTail: "OOM"})
		err := g.err()
		if err == nil || !strings.Contains(err.Error(), "ps 0 (rank 3, host h3, executor exec-3): parameter server exited with status 1 while the job ran") ||
			!strings.Contains(err.Error(), "OOM") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a failing worker fails the job before the chief ends", func(t *testing.T) {
		g := rolesRoster(t, true)
		_ = g.exit(&driverpb.ExitReport{ExecutorId: "exec-2", ExitCode: 2})
		if err := g.err(); err == nil || !strings.Contains(err.Error(), "worker 1 (rank 2, host h2") {
			t.Fatalf("err = %v", err)
		}
		exit0(g, "exec-0")
		if closed(g.succeeded) {
			t.Fatal("a failed job succeeded")
		}
	})
	t.Run("a failing chief fails the job", func(t *testing.T) {
		g := rolesRoster(t, true)
		_ = g.exit(&driverpb.ExitReport{ExecutorId: "exec-0", ExitCode: 1})
		if err := g.err(); err == nil || !strings.Contains(err.Error(), "chief (rank 0, host h0, executor exec-0): training process exited with status 1") {
			t.Fatalf("err = %v", err)
		}
	})
}

// explainLoss has the cluster manager say why exec-1 (rank 1, host h1)
// was lost, through no fault of the job, and checks that this ends the
// job's wait with a blameless loss whose error says each of wants.
func explainLoss(t *testing.T, g *roster, why string, wants ...string) {
	t.Helper()
	g.executorGone(Event{ExecutorID: "exec-1", Kind: ExecutorLost, Host: "h1", Blameless: true, Message: why})
	if !closed(g.failed) {
		t.Fatal("the cluster manager's reason did not end the wait")
	}
	var loss *lossError
	if err := g.err(); !errors.As(err, &loss) || !loss.blameless {
		t.Fatalf("err = %v, want a loss that is not the job's fault", err)
	}
	for _, want := range wants {
		if !strings.Contains(g.err().Error(), want) {
			t.Errorf("error %q lacks %q", g.err(), want)
		}
	}
}

// A training process stopped with SIGTERM (how a NodeManager stops a
// container YARN takes back) waits for the cluster manager's reason: a
// preemption reported in time fails the job as a loss that was not its
// fault, naming the reason; without a word, the SIGTERM itself fails the
// job once the grace period ends.
func TestSIGTERMWaitsForTheReason(t *testing.T) {
	start := func() *roster {
		g := newRoster([]string{"exec-0", "exec-1"})
		g.causeGrace = 50 * time.Millisecond
		register(t, g, "exec-0", "h0")
		register(t, g, "exec-1", "h1")
		if err := g.exit(&driverpb.ExitReport{ExecutorId: "exec-1", ExitCode: -1, Signal: "SIGTERM"}); err != nil {
			t.Fatal(err)
		}
		if closed(g.failed) {
			t.Fatal("the SIGTERM failed the job before the cluster manager could say why")
		}
		return g
	}

	g := start()
	explainLoss(t, g, "container_1_0001_01_000003 on h1 was preempted by YARN (exit status -102)",
		"rank 1", "preempted by YARN", "not the job's fault", "killed by signal SIGTERM")
	var loss *lossError

	g = start()
	testutil.WaitFor(t, 5*time.Second, testutil.Holds("job failure", func() bool { return closed(g.failed) }))
	if err := g.err(); err == nil || !errors.As(err, &loss) || loss.blameless || !strings.Contains(err.Error(), "killed by signal SIGTERM") {
		t.Fatalf("without a reason: err = %v, want the SIGTERM as the job's failure", err)
	}
}

// TestFailureNamesTheCauseNotItsEcho: a rank whose process exits with an
// error status just before another rank's executor reports an error it
// found itself (its feed's expired token) does not take the blame; alone,
// its exit fails the job once the grace period ends, and the job cannot
// succeed meanwhile.
func TestFailureNamesTheCauseNotItsEcho(t *testing.T) {
	start := func(slots []slot) *roster {
		g := newRosterOf(slots)
		g.rootCauseGrace, g.causeGrace = 100*time.Millisecond, 200*time.Millisecond
		for i, s := range slots {
			register(t, g, s.id, fmt.Sprintf("h%d", i))
		}
		if err := g.exit(&driverpb.ExitReport{ExecutorId: slots[1].id, ExitCode: 1, StderrTail: "RuntimeError: peer closed the connection"}); err != nil {
			t.Fatal(err)
		}
		if closed(g.failed) {
			t.Fatal("the echo failed the job at once")
		}
		return g
	}
	waitFailed := func(g *roster) {
		t.Helper()
		select {
		case <-g.failed:
		case <-time.After(testutil.Scale(10 * time.Second)):
			t.Fatal("the held failure never failed the job")
		}
	}

	t.Run("the executor's error wins", func(t *testing.T) {
		g := start(workerSlots([]string{"exec-0", "exec-1"}))
		if err := g.exit(&driverpb.ExitReport{ExecutorId: "exec-0", ExitCode: -1, Signal: "SIGTERM",
			Error: "feed: hdfs://nn: token 5 for alice is expired"}); err != nil {
			t.Fatal(err)
		}
		waitFailed(g)
		if msg := g.err().Error(); !strings.Contains(msg, "rank 0") || !strings.Contains(msg, "token 5 for alice is expired") {
			t.Errorf("error %q, want rank 0's expired token", msg)
		}
	})
	t.Run("alone, the exit fails the job", func(t *testing.T) {
		g := start(workerSlots([]string{"exec-0", "exec-1"}))
		waitFailed(g)
		if msg := g.err().Error(); !strings.Contains(msg, "rank 1") || !strings.Contains(msg, "peer closed") {
			t.Errorf("error %q, want rank 1's exit", msg)
		}
	})
	t.Run("the chief's end does not hide it", func(t *testing.T) {
		g := start([]slot{{id: "chief", rank: 0, role: RoleChief}, {id: "w", rank: 1, role: RoleWorker}})
		if err := g.exit(&driverpb.ExitReport{ExecutorId: "chief"}); err != nil {
			t.Fatal(err)
		}
		if !closed(g.failed) || closed(g.succeeded) {
			t.Fatal("the chief's end succeeded a job whose worker had just failed")
		}
	})
}

// A rank's place on its host follows the hosts as registered, a retried
// registration counts once, and the gang is complete only when every
// executor is in.
func TestLocalRanksFollowRegistrations(t *testing.T) {
	g := newRoster([]string{"exec-0", "exec-1", "exec-2"})
	register(t, g, "exec-0", "h1")
	register(t, g, "exec-0", "h1") // retried
	register(t, g, "exec-1", "h1")
	if closed(g.ready) {
		t.Fatal("ready with a retried registration counted twice")
	}
	m2 := register(t, g, "exec-2", "h2")
	if !closed(g.ready) {
		t.Fatal("not ready after every executor registered")
	}
	if local, size := g.localRanks(m2); local != 0 || size != 1 {
		t.Errorf("rank 2 on h2: local rank %d of %d, want 0 of 1", local, size)
	}
	m2 = register(t, g, "exec-2", "h1") // its retry came from h1
	if local, size := g.localRanks(m2); local != 2 || size != 3 {
		t.Errorf("rank 2 on h1: local rank %d of %d, want 2 of 3", local, size)
	}
}

// TestGangWaitIsNoSilence: an executor waits in Register, heartbeating
// nothing, until the whole gang has registered. On a loaded cluster the
// gang's containers start further apart than the heartbeat timeout; the
// first to register was then "lost: no heartbeat for 6s" while it waited
// (the README's TensorFlow job on real YARN). Its silence counts from the
// gang's completion.
func TestGangWaitIsNoSilence(t *testing.T) {
	const timeout = 6 * time.Second
	now := time.Unix(1000, 0)
	g := newRoster([]string{"exec-0", "exec-1"})
	g.now = func() time.Time { return now }
	g.silenceGrace = time.Millisecond // no cluster manager to explain a loss
	register(t, g, "exec-0", "h0")
	now = now.Add(3 * timeout) // exec-1's container starts late
	g.checkHeartbeats(timeout)
	if closed(g.failed) {
		t.Fatalf("exec-0, waiting in Register for the gang, was taken for lost: %v", g.err())
	}
	register(t, g, "exec-1", "h1")
	now = now.Add(timeout - time.Second)
	g.checkHeartbeats(timeout)
	if closed(g.failed) {
		t.Fatalf("lost within the timeout after the gang was complete: %v", g.err())
	}
	// Silent for longer than the timeout once the gang is complete: lost.
	if _, err := g.heartbeat("exec-1", nil, 0); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second)
	g.checkHeartbeats(timeout)
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("failure", func() bool { return closed(g.failed) }))
	if !closed(g.failed) || !strings.Contains(g.err().Error(), "rank 0") || !strings.Contains(g.err().Error(), "no heartbeat for 7s") {
		t.Fatalf("exec-0 silent 7s after the gang was complete: failed %v, %v", closed(g.failed), g.err())
	}
}
