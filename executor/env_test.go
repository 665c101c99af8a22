package executor

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/collective"
	"github.com/spindle-ml/spindle/driver/driverpb"
)

func envMap(kvs []string) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func TestTrainingEnv(t *testing.T) {
	task := &Task{
		JobId:                   "job-1",
		Env:                     map[string]string{"MY_VAR": "x", "SPINDLE_RANK": "99"},
		CheckpointDir:           "hdfs:///ckpt",
		PythonPath:              "/opt/spindle/python",
		CollectiveTimeoutMillis: 2500,
		Gpus:                    []int32{2, 3},
		Feed:                    &FeedTask{Mode: "tensor", LabelColumn: "y"},
	}
	id := identity{
		rank: 1, worldSize: 3, localRank: 1, localWorldSize: 2, host: "10.0.0.2", ifname: "eth1",
		peers: []*driverpb.Peer{
			{Rank: 0, Host: "10.0.0.1", Ports: []uint32{5000, 5001}},
			{Rank: 1, Host: "10.0.0.2", Ports: []uint32{6000, 6001}},
			{Rank: 2, Host: "10.0.0.3", Ports: []uint32{7000, 7001}},
		},
	}
	base := []string{"PATH=/usr/bin", EnvJobSecret + "=s3cret", "PYTHONPATH=/home/me/lib"}
	env, err := trainingEnv(base, task, id, "s3cret", "/w/feed.sock", "/w/files", "/w")
	if err != nil {
		t.Fatal(err)
	}
	got := envMap(env)
	for k, want := range map[string]string{
		"PATH":                       "/usr/bin",
		"MY_VAR":                     "x",
		"SPINDLE_RANK":               "1", // the contract wins over --env
		"SPINDLE_WORLD_SIZE":         "3",
		"SPINDLE_LOCAL_RANK":         "1",
		"SPINDLE_LOCAL_WORLD_SIZE":   "2",
		"SPINDLE_JOB_ID":             "job-1",
		"SPINDLE_FEED":               "/w/feed.sock",
		"SPINDLE_FEED_MODE":          "tensor",
		"SPINDLE_FEED_SPLITS":        "/w/splits.json",
		"SPINDLE_LABEL_COLUMN":       "y",
		"SPINDLE_PEERS":              "10.0.0.1:5000,10.0.0.2:6000,10.0.0.3:7000",
		"SPINDLE_PEER_LISTEN_FD":     "3",
		"SPINDLE_COLLECTIVE_TIMEOUT": "2.5",
		"SPINDLE_CHECKPOINT_DIR":     "hdfs:///ckpt",
		"SPINDLE_FILES_DIR":          "/w/files",
		"MASTER_ADDR":                "10.0.0.1",
		"MASTER_PORT":                "5001",
		"RANK":                       "1",
		"WORLD_SIZE":                 "3",
		"LOCAL_RANK":                 "1",
		"LOCAL_WORLD_SIZE":           "2",
		"GLOO_SOCKET_IFNAME":         "eth1",
		"CUDA_VISIBLE_DEVICES":       "2,3",
		"PYTHONPATH":                 "/opt/spindle/python:/home/me/lib",
	} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	if _, ok := got[EnvJobSecret]; ok {
		t.Error("the job secret reached the training environment")
	}
	var tf struct {
		Cluster map[string][]string `json:"cluster"`
		Task    struct {
			Type  string `json:"type"`
			Index int    `json:"index"`
		} `json:"task"`
	}
	if err := json.Unmarshal([]byte(got["TF_CONFIG"]), &tf); err != nil {
		t.Fatalf("TF_CONFIG %q: %v", got["TF_CONFIG"], err)
	}
	if tf.Cluster["chief"][0] != "10.0.0.1:5001" || len(tf.Cluster["worker"]) != 2 || tf.Task.Type != "worker" || tf.Task.Index != 0 {
		t.Errorf("TF_CONFIG = %+v", tf)
	}

	// A cluster manager's own device assignment is kept.
	env, _ = trainingEnv(append(base, "CUDA_VISIBLE_DEVICES=7"), task, id, "s3cret", "", "", "")
	if envMap(env)["CUDA_VISIBLE_DEVICES"] != "7" {
		t.Error("the worker's CUDA_VISIBLE_DEVICES was overridden")
	}
	// A peer that published too few ports is an error naming it.
	id.peers[2].Ports = []uint32{7000}
	if _, err := trainingEnv(base, task, id, "s3cret", "", "", ""); err == nil || !strings.Contains(err.Error(), "rank 2 (host 10.0.0.3)") {
		t.Errorf("err = %v", err)
	}
}

func TestTrainingEnvPeerToken(t *testing.T) {
	const secret = "s3cret"
	peers := []*driverpb.Peer{
		{Rank: 0, Host: "10.0.0.1", Ports: []uint32{5000, 5001}},
		{Rank: 1, Host: "10.0.0.2", Ports: []uint32{6000, 6001}},
	}
	// The user's --env cannot choose the token.
	task := &Task{JobId: "job-1", Env: map[string]string{collective.EnvPeerToken: "chosen-by-the-user"}}
	base := []string{"PATH=/usr/bin", EnvJobSecret + "=" + secret}
	tokens := make([]string, len(peers))
	for r := range peers {
		id := identity{rank: r, worldSize: len(peers), localWorldSize: 1, host: peers[r].Host, peers: peers}
		env, err := trainingEnv(base, task, id, secret, "", "", "")
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		got := envMap(env)
		tokens[r] = got[collective.EnvPeerToken]
		for k, v := range got {
			if strings.Contains(v, secret) {
				t.Errorf("rank %d: %s=%q carries the job secret", r, k, v)
			}
		}
		// The collectives library accepts what the executor hands it.
		if err := (collective.Config{WorldSize: 1, Token: tokens[r]}).Validate(); err != nil {
			t.Errorf("rank %d: token rejected by the collectives library: %v", r, err)
		}
	}
	// hex(HMAC-SHA256(secret, "spindle peer token v1")), computed
	// independently; other implementations of the derivation must agree.
	const want = "8eb09e33aca8a1b54230fc74290a4e9686caf76398f57bdf6018e704cbac7c08"
	for r, tok := range tokens {
		if tok != want {
			t.Errorf("rank %d: %s = %q, want %q", r, collective.EnvPeerToken, tok, want)
		}
	}
	// Another job, another token.
	if peerToken("other-secret") != "61c5018d94bf1221fe4e9135bbfe6378bcbfc266538acf939f73ba0ca0d445c9" {
		t.Errorf("token of another secret: %q", peerToken("other-secret"))
	}
	id := identity{rank: 0, worldSize: 2, localWorldSize: 1, peers: peers}
	if _, err := trainingEnv(base, task, id, "", "", "", ""); err == nil || !strings.Contains(err.Error(), "job secret") {
		t.Errorf("no secret: err = %v, want one naming the job secret", err)
	}
}

func TestPrefixLinesAndTail(t *testing.T) {
	var out bytes.Buffer
	tail := newLineTail(2)
	prefixLines(strings.NewReader("one\ntwo\r\nthree\nno newline"), &out, "[rank 4] ", tail)
	if want := "[rank 4] one\n[rank 4] two\n[rank 4] three\n[rank 4] no newline\n"; out.String() != want {
		t.Errorf("prefixed output %q, want %q", out.String(), want)
	}
	if tail.String() != "three\nno newline" {
		t.Errorf("tail = %q", tail.String())
	}
}
