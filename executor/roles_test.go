package executor

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// rolePeers publishes a job of a chief (when chief), two workers and one
// parameter server, rank r on host h<r> with service port 700<r>.
func rolePeers(chief bool) []*driverpb.Peer {
	var peers []*driverpb.Peer
	add := func(role string, n int) {
		for i := 0; i < n; i++ {
			r := len(peers)
			peers = append(peers, &driverpb.Peer{Rank: int32(r), Host: fmt.Sprintf("h%d", r),
				Ports: []uint32{uint32(6000 + r), uint32(7000 + r)}, Role: role, RoleRank: int32(i)})
		}
	}
	if chief {
		add(roleChief, 1)
	}
	add(roleWorker, 2)
	add(rolePS, 1)
	return peers
}

type tfConfigJSON struct {
	Cluster map[string][]string `json:"cluster"`
	Task    tfTask              `json:"task"`
}

func TestRoleEnv(t *testing.T) {
	tests := []struct {
		name     string
		chief    bool
		rank     int
		feedPath string
		want     map[string]string
		cluster  map[string][]string
		task     tfTask
	}{
		{"worker without chief", false, 1, "/w/feed.sock",
			map[string]string{"SPINDLE_ROLE": "worker", "SPINDLE_ROLE_RANK": "1", "SPINDLE_ROLE_WORLD_SIZE": "2",
				"SPINDLE_ROLES": "worker:2,ps:1", "SPINDLE_RANK": "1", "SPINDLE_WORLD_SIZE": "3",
				"SPINDLE_FEED": "/w/feed.sock", "SPINDLE_FEED_MODE": "tensor", "SPINDLE_LABEL_COLUMN": "y"},
			map[string][]string{"worker": {"h0:7000", "h1:7001"}, "ps": {"h2:7002"}}, tfTask{"worker", 1}},
		{"ps without chief", false, 2, "",
			map[string]string{"SPINDLE_ROLE": "ps", "SPINDLE_ROLE_RANK": "0", "SPINDLE_ROLE_WORLD_SIZE": "1",
				"SPINDLE_ROLES": "worker:2,ps:1", "SPINDLE_RANK": "2", "SPINDLE_FEED_MODE": "none", "SPINDLE_FEED": "",
				"SPINDLE_LABEL_COLUMN": ""},
			map[string][]string{"worker": {"h0:7000", "h1:7001"}, "ps": {"h2:7002"}}, tfTask{"ps", 0}},
		{"chief", true, 0, "",
			map[string]string{"SPINDLE_ROLE": "chief", "SPINDLE_ROLE_RANK": "0", "SPINDLE_ROLE_WORLD_SIZE": "1",
				"SPINDLE_ROLES": "chief:1,worker:2,ps:1", "SPINDLE_RANK": "0", "SPINDLE_WORLD_SIZE": "4",
				"SPINDLE_FEED_MODE": "none", "MASTER_ADDR": "h0", "MASTER_PORT": "7000"},
			map[string][]string{"chief": {"h0:7000"}, "worker": {"h1:7001", "h2:7002"}, "ps": {"h3:7003"}}, tfTask{"chief", 0}},
		{"worker after a chief", true, 2, "/w/feed.sock",
			map[string]string{"SPINDLE_ROLE": "worker", "SPINDLE_ROLE_RANK": "1", "SPINDLE_ROLE_WORLD_SIZE": "2", "SPINDLE_RANK": "2"},
			map[string][]string{"chief": {"h0:7000"}, "worker": {"h1:7001", "h2:7002"}, "ps": {"h3:7003"}}, tfTask{"worker", 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			peers := rolePeers(tc.chief)
			id := identity{rank: tc.rank, worldSize: len(peers), localWorldSize: 1, host: peers[tc.rank].Host, peers: peers}
			task := &Task{JobId: "j", PythonPath: "/p", Feed: &FeedTask{Mode: "tensor", LabelColumn: "y"}}
			env, err := trainingEnv([]string{"SPINDLE_FEED=/stale"}, task, id, "secret", tc.feedPath, "/w/files", "/w")
			if err != nil {
				t.Fatal(err)
			}
			got := envMap(env)
			for k, want := range tc.want {
				if got[k] != want {
					t.Errorf("%s = %q, want %q", k, got[k], want)
				}
			}
			var tf tfConfigJSON
			if err := json.Unmarshal([]byte(got["TF_CONFIG"]), &tf); err != nil {
				t.Fatalf("TF_CONFIG %q: %v", got["TF_CONFIG"], err)
			}
			if !reflect.DeepEqual(tf.Cluster, tc.cluster) || tf.Task != tc.task {
				t.Errorf("TF_CONFIG %s, want cluster %v task %v", got["TF_CONFIG"], tc.cluster, tc.task)
			}
		})
	}
}

// A driver that predates roles publishes none: every rank is a worker,
// and TF_CONFIG keeps rank 0 as the chief.
func TestRoleEnvWithoutRoles(t *testing.T) {
	peers := []*driverpb.Peer{{Rank: 0, Host: "a", Ports: []uint32{1, 2}}, {Rank: 1, Host: "b", Ports: []uint32{3, 4}}}
	id := identity{rank: 1, worldSize: 2, localWorldSize: 1, peers: peers}
	env, err := trainingEnv(nil, &Task{Feed: &FeedTask{Mode: "arrow"}}, id, "secret", "/f", "/w", "/")
	if err != nil {
		t.Fatal(err)
	}
	got := envMap(env)
	if got["SPINDLE_ROLE"] != "worker" || got["SPINDLE_ROLE_RANK"] != "1" || got["SPINDLE_ROLES"] != "worker:2" {
		t.Errorf("role variables %q %q %q", got["SPINDLE_ROLE"], got["SPINDLE_ROLE_RANK"], got["SPINDLE_ROLES"])
	}
	if want := `{"cluster":{"chief":["a:2"],"worker":["b:4"]},"task":{"type":"worker","index":0}}`; got["TF_CONFIG"] != want {
		t.Errorf("TF_CONFIG %s, want %s", got["TF_CONFIG"], want)
	}
	if p := outputPrefix(id); p != "[rank 1] " {
		t.Errorf("prefix %q", p)
	}
}

func TestFeedRankAndPrefix(t *testing.T) {
	peers := rolePeers(true)
	for rank, want := range []struct {
		feeds     bool
		share, of int
		prefix    string
	}{{false, 0, 2, "[chief] "}, {true, 0, 2, "[worker 0] "}, {true, 1, 2, "[worker 1] "}, {false, 0, 2, "[ps 0] "}} {
		id := identity{rank: rank, peers: peers}
		share, of := id.feedRank()
		if id.feeds() != want.feeds || (want.feeds && (share != want.share || of != want.of)) || outputPrefix(id) != want.prefix {
			t.Errorf("rank %d: feeds %v share %d of %d prefix %q, want %+v", rank, id.feeds(), share, of, outputPrefix(id), want)
		}
	}
}
