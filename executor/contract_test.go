package executor

import (
	"slices"
	"sort"
	"testing"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/envcontract"
	"github.com/spindle-ml/spindle/rdma"
)

// TestTrainingEnvIsTheContract checks that a training process gets
// exactly the variables of the environment contract when every optional
// one applies: none the contract does not define, none it defines missing.
func TestTrainingEnvIsTheContract(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	task := &Task{
		JobId: "job-1", CheckpointDir: "/ckpt", HadoopConfDir: "/etc/hadoop", HadoopUser: "me", Timeline: true,
		CollectiveTimeoutMillis: 30000, Gpus: []int32{0},
		PsStaleness: "bsp", PsWaitTimeoutMillis: 60000, PsMemoryMb: 1024, PsReplicas: 1, PsRejoin: true,
		Feed:             &FeedTask{Mode: "tensor", LabelColumn: "y", StartEpoch: 2, StartBatch: 5},
		ResumeCheckpoint: "ckpt-40", ResumeStep: 40, ReplacesWorkers: true,
	}
	id := identity{rank: 0, worldSize: 2, localWorldSize: 2, host: "10.0.0.1", ifname: "eth0",
		peers: []*driverpb.Peer{
			{Rank: 0, Host: "10.0.0.1", Ports: []uint32{5000, 5001}},
			{Rank: 1, Host: "10.0.0.1", Ports: []uint32{6000, 6001}},
		}}
	env, err := trainingEnv(nil, task, id, "s3cret", "/w/feed.sock", "/w/files", "/w")
	if err != nil {
		t.Fatal(err)
	}
	// The RDMA hints of a rank without devices: SPINDLE_COLLECTIVE_LINK is
	// the contract's, the frameworks' own (NCCL_IB_DISABLE, UCX_TLS) are not.
	env = withRDMAHints(env, rdma.Selection{Mode: rdma.ModeAuto}.Env(nil))
	got := envMap(env)
	var extra, missing []string
	for k := range got {
		if _, ok := envcontract.Lookup(k); !ok && !slices.Contains(rdma.HintNames, k) {
			extra = append(extra, k)
		}
	}
	for _, v := range envcontract.Vars {
		if v.Name == envcontract.PeersFile {
			continue // instead of SPINDLE_PEERS past thousands of ranks (TestPeersInAFile)
		}
		if _, ok := got[v.Name]; !ok {
			missing = append(missing, v.Name)
		}
	}
	sort.Strings(extra)
	sort.Strings(missing)
	if len(extra) > 0 || len(missing) > 0 {
		t.Fatalf("training environment differs from the contract: set but not defined %v; defined but not set %v", extra, missing)
	}
	for k, want := range map[string]string{envcontract.ResumeCheckpoint: "ckpt-40", envcontract.ResumeStep: "40",
		envcontract.FeedStartEpoch: "2", envcontract.FeedStartBatch: "5"} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	if got[envcontract.CollectiveTimeout] != "30" {
		t.Errorf("%s = %q, want 30", envcontract.CollectiveTimeout, got[envcontract.CollectiveTimeout])
	}
}
