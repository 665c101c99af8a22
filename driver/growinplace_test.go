package driver

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/feed"
)

// growingRoster is shrinkingRoster's gang of 4 that also grows back to 4
// in place; grows collects what onGrow heard. Rank 1 was lost and the
// other three went on as ranks 0 to 2.
func growingRoster(t *testing.T, grows *[]string) *roster {
	t.Helper()
	var shrinks []string
	g := shrinkingRoster(t, 4, 2, 1, &shrinks)
	g.growWorkers, g.maxWorkers = true, 4
	g.onGrow = func(who string, world int) { *grows = append(*grows, fmt.Sprintf("%s/%d", who, world)) }
	if err := g.exit(&driverpb.ExitReport{ExecutorId: "exec-1", Signal: "SIGKILL"}); err != nil {
		t.Fatal(err)
	}
	settleShrink(g)
	return g
}

// TestNewcomerGrowsTheGangInPlace: once an elastic gang of 4 went on as 3
// in place, a newcomer that registers takes rank 3 after the three running
// ranks, which keep theirs; their heartbeats carry a membership of four
// whose epoch grew by one (the newcomer in its first incarnation), the
// newcomer's registration names the world of 4, no second newcomer is
// taken while it settles or once the gang has 4, and the job succeeds
// when all four exit 0.
func TestNewcomerGrowsTheGangInPlace(t *testing.T) {
	var grows []string
	g := growingRoster(t, &grows)
	m := g.addNewcomer("exec-n1")
	if m == nil {
		t.Fatal("a gang of 3 of 4 took no newcomer")
	}
	if g.addNewcomer("exec-n2") != nil {
		t.Fatal("a second newcomer was taken while the first was joining")
	}
	register(t, g, "exec-n1", "h9")
	if !closed(m.joined) || m.rank != 3 {
		t.Fatalf("the newcomer registered at rank %d (joined %v), want rank 3", m.rank, closed(m.joined))
	}
	if len(grows) != 1 || grows[0] != "rank 3 (host h9, executor exec-n1)/4" {
		t.Fatalf("onGrow heard %q", grows)
	}
	got, hosts := heartbeatMembership(t, g, "exec-0", 1)
	if got.GetVersion() != 2 || !slices.Equal(hosts, []string{"h0", "h2", "h3", "h9"}) || !slices.Equal(got.GetIncarnations(), []uint32{1, 0, 0, 1}) ||
		got.GetJoined() != 3 || len(got.GetLeft()) != 0 {
		t.Fatalf("membership %v, want version 2 of h0, h2, h3, h9 with incarnations [1 0 0 1], rank 3 joined", got)
	}
	if n := len(g.peerList()); n != 4 {
		t.Fatalf("the newcomer's registration names %d peers, want 4", n)
	}
	g.mu.Lock()
	g.growing = nil // settled
	g.mu.Unlock()
	if g.addNewcomer("exec-n2") != nil {
		t.Fatal("a gang at its size took a newcomer")
	}
	for _, id := range []string{"exec-0", "exec-2", "exec-3"} {
		if err := g.exit(&driverpb.ExitReport{ExecutorId: id}); err != nil {
			t.Fatal(err)
		}
	}
	if closed(g.succeeded) {
		t.Fatal("the job succeeded while the newcomer still trained")
	}
	if err := g.exit(&driverpb.ExitReport{ExecutorId: "exec-n1"}); err != nil {
		t.Fatal(err)
	}
	if !closed(g.succeeded) || closed(g.failed) {
		t.Fatalf("the job did not succeed: %v", g.err())
	}
}

// TestNewcomerThatDoesNotRegisterIsDropped: a newcomer given up on before
// it registered leaves the membership as it was, the gang may take
// another, and its late registration is refused.
func TestNewcomerThatDoesNotRegisterIsDropped(t *testing.T) {
	var grows []string
	g := growingRoster(t, &grows)
	m := g.addNewcomer("exec-n1")
	g.dropNewcomer(m)
	if v := g.currentMembership().GetVersion(); v != 1 || len(grows) != 0 {
		t.Fatalf("membership version %d and grows %q after a dropped newcomer, want version 1 and none", v, grows)
	}
	if _, err := g.register(&driverpb.RegisterRequest{ExecutorId: "exec-n1", Host: "h9"}); err == nil || !strings.Contains(err.Error(), "exec-n1") {
		t.Fatalf("a dropped newcomer registered: %v", err)
	}
	if g.addNewcomer("exec-n2") == nil {
		t.Fatal("the gang took no newcomer after dropping one")
	}
}

// TestGrowsInPlaceWithInputOnlyWhereEpochsAreHeld: growth in place needs
// the shrink's conditions; with input, a pushed feed under even batches,
// whose epochs' ends the newcomers join at (growinput.go).
func TestGrowsInPlaceWithInputOnlyWhereEpochsAreHeld(t *testing.T) {
	slots := workerSlots([]string{"a", "b", "c"})
	c := Config{FailurePolicy: PolicyElastic, ShrinkInPlace: true, GrowInPlace: true, MinExecutors: 2, NumExecutors: 4}
	if !c.growsInPlace(slots) {
		t.Error("a job without input does not grow in place")
	}
	withInput := c
	withInput.Inputs, withInput.FeedMode, withInput.EvenBatches = []string{"data/"}, "tensor", feed.EvenPad
	if !withInput.growsInPlace(slots) {
		t.Error("a job with a pushed feed under even batches does not grow in place")
	}
	direct := withInput
	direct.FeedMode = "direct"
	if direct.growsInPlace(slots) {
		t.Error("a job whose processes read their own splits grows in place")
	}
	uneven := withInput
	uneven.EvenBatches = feed.EvenOff
	if uneven.growsInPlace(slots) {
		t.Error("a job with uneven batches grows in place")
	}
	off := c
	off.GrowInPlace = false
	if off.growsInPlace(slots) {
		t.Error("a job grows in place without spindle.failure.growInPlace")
	}
}

// TestGrowInPlaceNeedsShrinkInPlace: the key without shrinkInPlace is bad
// input, named.
func TestGrowInPlaceNeedsShrinkInPlace(t *testing.T) {
	c := Config{FailurePolicy: PolicyElastic, GrowInPlace: true, NumExecutors: 2, MinExecutors: 1}
	err := c.checkElastic()
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "spindle.failure.growInPlace needs spindle.failure.shrinkInPlace=true") {
		t.Fatalf("checkElastic = %v, want a config error naming spindle.failure.growInPlace", err)
	}
}

// heartbeatMembership sends executor id's heartbeat, which has membership
// version, and returns the membership its response carries and the hosts
// of its peers, checking that each peer says its own rank.
func heartbeatMembership(t *testing.T, g *roster, id string, version int64) (*driverpb.Membership, []string) {
	t.Helper()
	hb, err := g.heartbeat(id, nil, version)
	if err != nil {
		t.Fatal(err)
	}
	m := hb.GetMembership()
	var hosts []string
	for i, p := range m.GetPeers() {
		hosts = append(hosts, p.GetHost())
		if p.GetRank() != int32(i) {
			t.Errorf("peer %d says rank %d", i, p.GetRank())
		}
	}
	return m, hosts
}
