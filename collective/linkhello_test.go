package collective

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// testMesh starts a mesh member of job "test-job" on ln.
func testMesh(t *testing.T, rank int, peers []string, ln net.Listener, connectTimeout time.Duration) *Mesh {
	t.Helper()
	m, err := NewMesh(MeshConfig{
		Rank: rank, WorldSize: len(peers), Peers: peers, Listener: ln, JobID: "test-job",
		ConnectTimeout: testutil.Scale(connectTimeout), Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestRefusalNamesCulprit: a rank that gave up connecting because of
// another rank refuses a late link naming that rank, so the dialer blames
// the same rank rather than the one that refused it.
func TestRefusalNamesCulprit(t *testing.T) {
	lns, peers := loopbackListeners(t, 3)
	lns[1].Close() // rank 1 never starts
	m0 := testMesh(t, 0, peers, lns[0], 300*time.Millisecond)
	m2 := testMesh(t, 2, peers, lns[2], 300*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	_, _, err := m2.Streams(ctx, []int{1}, nil)
	if culpritOf(err, -1) != 1 {
		t.Fatalf("rank 2: Streams: %v, want a failure blaming rank 1", err)
	}
	_, err = m0.dialHello(ctx, 2, kindLink, time.Time{})
	var pe *PeerError
	if !errors.As(err, &pe) || pe.Rank != 1 || pe.Addr != peers[1] || !errors.Is(err, ErrPeerLost) ||
		!strings.Contains(err.Error(), "reported by rank 2") {
		t.Fatalf("rank 0: link to rank 2: %v, want ErrPeerLost blaming rank 1, reported by rank 2", err)
	}
	if !isRefusal(err) {
		t.Fatalf("rank 0 would dial rank 2 again after %v", err)
	}
}

// TestRelayedRefusalUnparsable: a refusal that only looks like a relayed
// one blames the rank that sent it.
func TestRelayedRefusalUnparsable(t *testing.T) {
	m := &Mesh{cfg: MeshConfig{Rank: 0, WorldSize: 3, Peers: []string{"h:0", "h:1", "h:2"}}}
	for _, reason := range []string{blamingPrefix + "x", blamingPrefix + "7 (failure code 1): out of range"} {
		err := m.relayedRefusal(2, reason)
		if culpritOf(err, -1) != 2 || !errors.Is(err, ErrHandshake) {
			t.Errorf("relayedRefusal(%q) = %v, want ErrHandshake blaming rank 2", reason, err)
		}
	}
}

// TestOwnRefusalBeforeNotice: a rank whose hello was refused hears of it
// twice, on its own connection and in the refuser's notice blaming it. It
// names the peer that refused it even when the notice is handled first.
func TestOwnRefusalBeforeNotice(t *testing.T) {
	lns, peers := loopbackListeners(t, 3)
	m0 := testMesh(t, 0, peers[:2], lns[0], 20*time.Second)
	// The refuser: its listener (peers[1]) is the test's; its notices come
	// from a mesh on another port.
	m1 := testMesh(t, 1, []string{peers[0], peers[2]}, lns[2], 20*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	type result struct{ err error }
	done := make(chan result, 1)
	go func() {
		_, _, err := m0.Streams(ctx, []int{1}, []int{1})
		done <- result{err}
	}()
	c, err := lns[1].Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lns[1].Close() // the notice rank 0 then sends rank 1 is refused at once
	if _, err := readHello(c); err != nil {
		t.Fatal(err)
	}
	const why = "addressed to rank 1, but this is rank 2"
	// Told first: rank 0 is not to take it as its failure while its own
	// answer is on the way. The notice is acknowledged only after that.
	n := notice{culprit: 0, code: codeHandshake, msg: "connection from rank 0: " + why}
	m1.sendNotice(0, n, time.Now().Add(testutil.Scale(200*time.Millisecond)))
	if err := writeStatus(c, statusRejected, why); err != nil {
		t.Fatal(err)
	}
	r := <-done
	<-m0.Done()
	for what, err := range map[string]error{"Streams": r.err, "the mesh's failure": m0.Err()} {
		var pe *PeerError
		if !errors.As(err, &pe) || pe.Rank != 1 || !errors.Is(err, ErrHandshake) || !strings.Contains(err.Error(), why) {
			t.Fatalf("rank 0: %s: %v, want ErrHandshake blaming rank 1 and saying %q", what, err, why)
		}
	}
}
