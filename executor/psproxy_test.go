package executor

import (
	"io"
	"log/slog"
	"testing"

	"github.com/spindle-ml/spindle/ps/client"
)

// The workers and chief of a job with the built-in parameter server get
// the proxy's socket; its servers and the ranks of other jobs do not.
func TestPSSocketEnv(t *testing.T) {
	peers := rolePeers(true) // chief, 2 workers, 1 ps
	for _, tc := range []struct {
		name      string
		rank      int
		staleness string
		builtin   bool
		want      string
	}{
		{"chief", 0, "bsp", false, "/w/ps.sock"},
		{"worker", 2, "bsp", false, "/w/ps.sock"},
		{"server", 3, "bsp", true, ""},
		{"job without the built-in ps", 1, "", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := &Task{JobId: "j", Feed: &FeedTask{}, PsStaleness: tc.staleness, BuiltinPs: tc.builtin, PythonPath: "/py"}
			id := identity{rank: tc.rank, worldSize: len(peers), localWorldSize: 1, host: "h", peers: peers}
			env, err := trainingEnv(nil, task, id, "s3cret", "", "/w/files", "/w")
			if err != nil {
				t.Fatal(err)
			}
			got, ok := envMap(env)["SPINDLE_PS_SOCKET"]
			if got != tc.want || ok != (tc.want != "") {
				t.Fatalf("SPINDLE_PS_SOCKET = %q (set: %v), want %q", got, ok, tc.want)
			}
		})
	}
}

// The proxy finds the servers and its worker index as a Go trainer of
// the same rank would: the ranks of role ps on their peer ports, and the
// rank among the others.
func TestPSClientEnv(t *testing.T) {
	peers := rolePeers(true)
	for rank, wantWorker := range []int{0, 1, 2} {
		id := identity{rank: rank, worldSize: len(peers), localWorldSize: 1, host: "h", peers: peers}
		env, err := psClientEnv(id, "s3cret")
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.FromRanks(env.PSRanks(), slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatalf("rank %d: %v", rank, err)
		}
		c.Abandon()
		if c.Worker() != wantWorker || c.Servers() != 1 {
			t.Errorf("rank %d: worker %d of %d servers, want worker %d of 1", rank, c.Worker(), c.Servers(), wantWorker)
		}
		if env.Peers[3] != "h3:6003" || env.PeerToken != peerToken("s3cret") {
			t.Errorf("rank %d: server at %s, token %q: want h3:6003 and the job's peer token", rank, env.Peers[3], env.PeerToken)
		}
	}
	id := identity{rank: 3, worldSize: len(peers), localWorldSize: 1, host: "h", peers: peers}
	env, err := psClientEnv(id, "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := client.FromRanks(env.PSRanks(), slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil {
		c.Abandon()
		t.Error("a server's rank got a client")
	}
}

// The proxy's client takes the data link the training process got: the
// last value of the variable, as the process's environment holds it.
func TestEnvValue(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{nil, ""},
		{[]string{"A=1", "SPINDLE_COLLECTIVE_LINK=ucx"}, "ucx"},
		{[]string{"SPINDLE_COLLECTIVE_LINK=tcp", "SPINDLE_COLLECTIVE_LINK=ucx:required"}, "ucx:required"},
		{[]string{"SPINDLE_COLLECTIVE_LINKX=ucx"}, ""},
	} {
		if got := envValue(tc.env, "SPINDLE_COLLECTIVE_LINK"); got != tc.want {
			t.Errorf("envValue(%q) = %q, want %q", tc.env, got, tc.want)
		}
	}
}
