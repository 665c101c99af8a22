package driver

import (
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
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
	stop, why, _ := g.heartbeat("exec-0", nil)
	if !stop || !strings.Contains(why, "rank 1") {
		t.Errorf("heartbeat after failure: stop=%v why=%q", stop, why)
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
	register(t, g, "exec-0", "h0")
	register(t, g, "exec-1", "h1")
	now := time.Now()
	g.now = func() time.Time { return now.Add(10 * time.Second) }
	_, _, _ = g.heartbeat("exec-0", nil)
	g.checkHeartbeats(5 * time.Second)
	if err := g.err(); err == nil || !strings.Contains(err.Error(), "rank 1 (host h1") || !strings.Contains(err.Error(), "no heartbeat") {
		t.Fatalf("silent executor not declared lost: %v", err)
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
