package task

import (
	"errors"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spindle-ml/spindle/feed/wire"
	"github.com/spindle-ml/spindle/internal/envcontract"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fullEnv is what an executor sets for rank 1 of 2.
func fullEnv() map[string]string {
	return map[string]string{
		EnvRank:                 "1",
		EnvWorldSize:            "2",
		EnvLocalRank:            "0",
		EnvLocalWorldSize:       "1",
		EnvJobID:                "job-7",
		EnvFeed:                 "/run/spindle/feed.sock",
		EnvFeedMode:             "tensor",
		EnvCheckpointDir:        "hdfs://nn:8020/ckpt/job-7",
		EnvPeers:                "10.0.0.1:7100,10.0.0.2:7100",
		EnvPeerListenFD:         "3",
		EnvCollectiveTimeout:    "2.5",
		envcontract.Generation:  "1",
		envcontract.Replacement: "2",
	}
}

func lookupIn(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func TestRoles(t *testing.T) {
	env := fullEnv()
	env[EnvWorldSize], env[EnvRank], env[EnvLocalWorldSize] = "4", "3", "4"
	env[EnvPeers] = "a:1,b:1,c:1,d:1"
	env[EnvRoles] = "chief:1,worker:2,ps:1"
	got, err := fromLookup(lookupIn(env))
	if err != nil {
		t.Fatal(err)
	}
	if first, n := got.RoleRanks("ps"); first != 3 || n != 1 {
		t.Errorf("RoleRanks(ps) = %d, %d; want 3, 1", first, n)
	}
	if first, n := got.RoleRanks("worker"); first != 1 || n != 2 {
		t.Errorf("RoleRanks(worker) = %d, %d; want 1, 2", first, n)
	}
	for _, bad := range []string{"chief:1,worker:2", "worker", "worker:x,ps:2", "worker:0,ps:4"} {
		env[EnvRoles] = bad
		if _, err := fromLookup(lookupIn(env)); err == nil || !strings.Contains(err.Error(), EnvRoles) {
			t.Errorf("%s=%s: got %v, want an error naming it", EnvRoles, bad, err)
		}
	}
}

func TestFromEnv(t *testing.T) {
	got, err := fromLookup(lookupIn(fullEnv()))
	if err != nil {
		t.Fatal(err)
	}
	want := Env{
		Rank: 1, WorldSize: 2, LocalRank: 0, LocalWorldSize: 1,
		Role: "worker", RoleRank: 1, RoleWorldSize: 2, Roles: []RoleSize{{"worker", 2}},
		JobID: "job-7", Feed: "/run/spindle/feed.sock", FeedMode: wire.ModeTensor,
		CheckpointDir: "hdfs://nn:8020/ckpt/job-7", CheckpointKeep: 3,
		Peers:        []string{"10.0.0.1:7100", "10.0.0.2:7100"},
		PeerListenFD: 3, CollectiveTimeout: 2500 * time.Millisecond,
		Generation: 1, Replacement: 2,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("FromEnv =\n%+v\nwant\n%+v", got, want)
	}

	// The minimum: ranks only, a job without input or peers.
	got, err = fromLookup(lookupIn(map[string]string{
		EnvRank: "0", EnvWorldSize: "1", EnvLocalRank: "0", EnvLocalWorldSize: "1",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got.PeerListenFD != -1 || got.Peers != nil || got.FeedMode != "" {
		t.Fatalf("minimal environment: %+v", got)
	}
}

// A parameter server of a job with roles: its role, and no feed.
func TestFromEnvRole(t *testing.T) {
	env := fullEnv()
	delete(env, EnvFeed)
	env[EnvFeedMode] = "none"
	env[EnvRole], env[EnvRoleRank], env[EnvRoleWorldSize] = "ps", "0", "1"
	got, err := fromLookup(lookupIn(env))
	if err != nil {
		t.Fatal(err)
	}
	if got.Role != "ps" || got.RoleRank != 0 || got.RoleWorldSize != 1 || got.Feed != "" || got.FeedMode != "" {
		t.Fatalf("FromEnv = %+v", got)
	}
	env[EnvRoleRank] = "1"
	if _, err := fromLookup(lookupIn(env)); err == nil || !strings.Contains(err.Error(), "SPINDLE_ROLE_RANK=1 is not below SPINDLE_ROLE_WORLD_SIZE=1") {
		t.Fatalf("err = %v", err)
	}
}

func TestFromEnvErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change map[string]string // "" deletes the variable
		want   string
		is     error
	}{
		{"not under spindle", map[string]string{EnvRank: ""}, "SPINDLE_RANK is not set", ErrNotSpindle},
		{"rank not a number", map[string]string{EnvRank: "abc"}, "SPINDLE_RANK=abc: not an integer", ErrBadEnv},
		{"negative rank", map[string]string{EnvRank: "-1"}, "SPINDLE_RANK=-1: must be at least 0", ErrBadEnv},
		{"no world size", map[string]string{EnvWorldSize: ""}, "SPINDLE_WORLD_SIZE is not set", ErrBadEnv},
		{"zero world", map[string]string{EnvWorldSize: "0"}, "SPINDLE_WORLD_SIZE=0: must be at least 1", ErrBadEnv},
		{"rank too big", map[string]string{EnvRank: "2"}, "SPINDLE_RANK=2 is not below SPINDLE_WORLD_SIZE=2", ErrBadEnv},
		{"local rank too big", map[string]string{EnvLocalRank: "1"}, "SPINDLE_LOCAL_RANK=1 is not below SPINDLE_LOCAL_WORLD_SIZE=1", ErrBadEnv},
		{"local world missing", map[string]string{EnvLocalWorldSize: ""}, "SPINDLE_LOCAL_WORLD_SIZE is not set", ErrBadEnv},
		{"bad mode", map[string]string{EnvFeedMode: "numpy"}, "SPINDLE_FEED_MODE=numpy", ErrBadEnv},
		{"mode without feed", map[string]string{EnvFeed: ""}, "SPINDLE_FEED is not set", ErrBadEnv},
		{"feed without mode", map[string]string{EnvFeedMode: ""}, "SPINDLE_FEED_MODE is not", ErrBadEnv},
		{"peer count", map[string]string{EnvPeers: "a:1"}, "lists 1 peers for SPINDLE_WORLD_SIZE=2", ErrBadEnv},
		{"peer without port", map[string]string{EnvPeers: "a:1,b"}, `peer 1 is "b"`, ErrBadEnv},
		{"peer bad port", map[string]string{EnvPeers: "a:1,b:0"}, `peer 1 has port "0"`, ErrBadEnv},
		{"bad fd", map[string]string{EnvPeerListenFD: "x"}, "SPINDLE_PEER_LISTEN_FD=x", ErrBadEnv},
		{"bad timeout", map[string]string{EnvCollectiveTimeout: "30s"}, "SPINDLE_COLLECTIVE_TIMEOUT=30s: want a positive number of seconds", ErrBadEnv},
		{"negative keep", map[string]string{envcontract.CheckpointKeep: "-1"}, "SPINDLE_CHECKPOINT_KEEP=-1: want a whole number", ErrBadEnv},
		{"zero timeout", map[string]string{EnvCollectiveTimeout: "0"}, "SPINDLE_COLLECTIVE_TIMEOUT=0", ErrBadEnv},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := fullEnv()
			for k, v := range tc.change {
				if v == "" {
					delete(env, k)
				} else {
					env[k] = v
				}
			}
			_, err := fromLookup(lookupIn(env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if !errors.Is(err, tc.is) {
				t.Fatalf("error %v does not wrap %v", err, tc.is)
			}
		})
	}
}

// TestFromEnvReal goes through the real process environment once.
func TestFromEnvReal(t *testing.T) {
	for k, v := range fullEnv() {
		t.Setenv(k, v)
	}
	env, err := FromEnv()
	if err != nil || env.Rank != 1 || env.FeedMode != wire.ModeTensor {
		t.Fatalf("FromEnv = %+v, %v", env, err)
	}
}

// TestPeerListener hands a bound listener over by descriptor number, as
// the executor does, and accepts a connection on it.
func TestPeerListener(t *testing.T) {
	orig, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := orig.Addr().String()
	env := Env{PeerListenFD: dupFD(t, orig.(*net.TCPListener))}
	orig.Close()
	ln, err := env.PeerListener()
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if ln.Addr().String() != addr {
		t.Fatalf("listener on %s, want %s", ln.Addr(), addr)
	}
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial the inherited listener: %v", err)
	}
	c.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	if _, err := (Env{PeerListenFD: -1}).PeerListener(); !errors.Is(err, ErrBadEnv) {
		t.Fatalf("PeerListener without a descriptor: %v", err)
	}
	// A descriptor that is not a socket.
	tmp, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer tmp.Close()
	fd := dupFD(t, tmp)
	_, err = Env{PeerListenFD: fd}.PeerListener()
	if err == nil || !strings.Contains(err.Error(), "SPINDLE_PEER_LISTEN_FD="+strconv.Itoa(fd)) {
		t.Fatalf("PeerListener on a regular file: %v", err)
	}
}

// dupFD returns a new descriptor for f's file that nothing else owns, as
// a child process inherits one; PeerListener takes it over.
func dupFD(t *testing.T, f interface {
	SyscallConn() (syscall.RawConn, error)
}) int {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	fd := -1
	var derr error
	if err := rc.Control(func(s uintptr) { fd, derr = syscall.Dup(int(s)) }); err != nil || derr != nil {
		t.Fatalf("dup: %v %v", err, derr)
	}
	return fd
}
