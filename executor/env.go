package executor

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/envcontract"
	"github.com/spindle-ml/spindle/python"
)

// Ports by their index in a peer's published list.
const (
	portPeer    = 0 // Spindle's collectives
	portService = 1 // the framework's rendezvous (MASTER_PORT, TF gRPC)
)

// peerListenFD is the descriptor number the peer listener gets in the
// training process (the first of exec.Cmd.ExtraFiles).
const peerListenFD = 3

// identity is what the driver told this executor at registration.
type identity struct {
	rank, worldSize, localRank, localWorldSize int
	peers                                      []*driverpb.Peer
	host, ifname                               string
	// membership is the gang's collective membership when a rank was
	// replaced before this executor registered; nil otherwise.
	membership *driverpb.Membership
}

// peerTokenLabel is what the job secret signs to make the peer token.
const peerTokenLabel = "spindle peer token v1"

// peerToken derives the token that authenticates the connections between
// a job's training processes (SPINDLE_PEER_TOKEN) from the job secret.
// Every rank derives the same token; the training process never sees the
// secret itself, so it cannot sign control-plane calls.
func peerToken(jobSecret string) string {
	m := hmac.New(sha256.New, []byte(jobSecret))
	m.Write([]byte(peerTokenLabel))
	return hex.EncodeToString(m.Sum(nil))
}

// peerAddr returns the host:port of port i of a published peer.
func peerAddr(p *driverpb.Peer, i int) (string, error) {
	if len(p.GetPorts()) <= i {
		return "", fmt.Errorf("rank %d (host %s) published %d ports, want %d", p.GetRank(), p.GetHost(), len(p.GetPorts()), i+1)
	}
	return net.JoinHostPort(p.GetHost(), strconv.Itoa(int(p.GetPorts()[i]))), nil
}

// trainingEnv builds the training process's environment: the executor's
// own (minus secrets), the user's --env, then Spindle's contract, which
// wins over both. jobSecret is used only to derive the peer token.
func trainingEnv(base []string, t *Task, id identity, jobSecret, feedPath, filesDir, sockDir string) ([]string, error) {
	if jobSecret == "" {
		return nil, errors.New("no job secret to derive the peer token from")
	}
	env := userEnv(base, t)
	peers, service, err := peerAddrs(id)
	if err != nil {
		return nil, err
	}
	set := func(k string, v any) { env[k] = fmt.Sprint(v) }
	setRankEnv(env, set, t, id, feedPath)
	if err := setPeersEnv(env, peers, filesDir); err != nil {
		return nil, fmt.Errorf("rank %d: %w", id.rank, err)
	}
	set(envcontract.PeerListenFD, peerListenFD)
	set(envcontract.PeerToken, peerToken(jobSecret))
	set(envcontract.Host, id.host)
	setServiceEnv(set, t, id, feedPath, filesDir, sockDir)
	if err := setFrameworkEnv(env, set, t, id, service); err != nil {
		return nil, err
	}
	if err := setRuntimeEnv(env, set, t); err != nil {
		return nil, err
	}
	if v := env[envcontract.TFConfig]; len(envcontract.TFConfig)+len(v)+2 > envcontract.MaxVarBytes {
		// TensorFlow reads its cluster from the variable only; a job this
		// large does not get one (envHook logs it).
		delete(env, envcontract.TFConfig)
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	for _, kv := range out {
		if len(kv)+1 > envcontract.MaxVarBytes {
			k, v, _ := strings.Cut(kv, "=")
			return nil, fmt.Errorf("rank %d: %s would be %d bytes, over Linux's limit of %d for one "+
				"environment variable: the training process could not start", id.rank, k, len(v), envcontract.MaxVarBytes)
		}
	}
	return out, nil
}

// userEnv is the executor's own environment without the job's secrets,
// under the user's --env.
func userEnv(base []string, t *Task) map[string]string {
	env := map[string]string{}
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	delete(env, EnvJobSecret)
	delete(env, envcontract.JobTLS)
	for k, v := range t.Env {
		env[k] = v
	}
	return env
}

// peerAddrs returns every rank's collective (peer) and framework
// (service) address, by rank.
func peerAddrs(id identity) (peers, service []string, err error) {
	peers = make([]string, len(id.peers))
	service = make([]string, len(id.peers))
	for i, p := range id.peers {
		if peers[i], err = peerAddr(p, portPeer); err != nil {
			return nil, nil, err
		}
		if service[i], err = peerAddr(p, portService); err != nil {
			return nil, nil, err
		}
	}
	return peers, service, nil
}

// setRankEnv sets who the process is in the job: its ranks, its role and
// its feed.
func setRankEnv(env map[string]string, set func(string, any), t *Task, id identity, feedPath string) {
	set(envcontract.Rank, id.rank)
	set(envcontract.WorldSize, id.worldSize)
	set(envcontract.LocalRank, id.localRank)
	set(envcontract.LocalWorldSize, id.localWorldSize)
	set(envcontract.JobID, t.JobId)
	if feedPath != "" {
		set(envcontract.Feed, feedPath)
		set(envcontract.FeedMode, t.GetFeed().GetMode())
		set(envcontract.FeedSplits, feedSplitsPath(feedPath, t.GetFeed().GetMode()))
	} else {
		// Only workers are fed.
		delete(env, envcontract.Feed)
		delete(env, envcontract.FeedSplits)
		set(envcontract.FeedMode, feedModeNone)
	}
	roleEnv(set, id)
}

// setServiceEnv sets where the process finds the executor's services
// (reports, parameter servers, checkpoints) and how the task uses them.
func setServiceEnv(set func(string, any), t *Task, id identity, feedPath, filesDir, sockDir string) {
	set(envcontract.FilesDir, filesDir)
	set(envcontract.CollectiveTimeout, strconv.FormatFloat(float64(t.CollectiveTimeoutMillis)/1000, 'f', -1, 64))
	set(envcontract.ReportSocket, reportSocket(sockDir))
	set(envcontract.Generation, strconv.Itoa(int(t.Generation)))
	set(envcontract.RestartCount, strconv.Itoa(int(t.Generation)))
	set(envcontract.Replacement, strconv.Itoa(int(t.Replacement)))
	set(envcontract.Incarnations, formatIncarnations(incarnationsOf(id.membership, id.worldSize)))
	if t.ReplacesWorkers {
		set(envcontract.Membership, membershipPath(filesDir))
	}
	if t.Timeline {
		set(envcontract.Timeline, "1")
	}
	if t.PsStaleness != "" {
		set(envcontract.PSStaleness, t.PsStaleness)
		set(envcontract.PSWaitTimeout, strconv.FormatFloat(float64(t.PsWaitTimeoutMillis)/1000, 'f', -1, 64))
		set(envcontract.PSMemory, strconv.FormatInt(t.PsMemoryMb, 10))
		set(envcontract.PSReplicas, strconv.Itoa(int(t.PsReplicas)))
		if t.PsRejoin {
			set(envcontract.PSRejoin, "1")
		}
	}
	if psProxied(t, id) {
		set(envcontract.PSSocket, psSocket(sockDir))
	}
	if t.CheckpointDir != "" {
		set(envcontract.CheckpointDir, t.CheckpointDir)
		set(envcontract.CheckpointKeep, strconv.Itoa(int(t.CheckpointKeep)))
		set(envcontract.CheckpointService, checkpointSocket(sockDir))
	}
	if t.ResumeCheckpoint != "" {
		set(envcontract.ResumeCheckpoint, t.ResumeCheckpoint)
		set(envcontract.ResumeStep, strconv.FormatInt(t.ResumeStep, 10))
	}
	if f := t.GetFeed(); feedPath != "" && (f.GetStartEpoch() > 0 || f.GetStartBatch() > 0) {
		set(envcontract.FeedStartEpoch, strconv.Itoa(int(f.GetStartEpoch())))
		set(envcontract.FeedStartBatch, strconv.FormatInt(f.GetStartBatch(), 10))
	}
	if t.GetFeed().GetLabelColumn() != "" && feedPath != "" {
		set(envcontract.LabelColumn, t.GetFeed().GetLabelColumn())
	}
}

// setFrameworkEnv sets the training frameworks' own rendezvous (PyTorch,
// TensorFlow) and devices.
func setFrameworkEnv(env map[string]string, set func(string, any), t *Task, id identity, service []string) error {
	// PyTorch (torch.distributed's env:// rendezvous).
	rank0 := id.peers[0]
	set(envcontract.MasterAddr, rank0.GetHost())
	set(envcontract.MasterPort, rank0.GetPorts()[portService])
	set(envcontract.TorchRank, id.rank)
	set(envcontract.TorchWorldSize, id.worldSize)
	set(envcontract.TorchLocalRank, id.localRank)
	set(envcontract.TorchLocalWorldSize, id.localWorldSize)
	if id.ifname != "" {
		set(envcontract.GlooSocketIfname, id.ifname)
		set(envcontract.NCCLSocketIfname, id.ifname)
	}

	// TensorFlow: each role under its name; without roles, rank 0 is the
	// chief and the others are workers.
	tf, err := tfConfigFor(id.peers, service, id.rank)
	if err != nil {
		return err
	}
	set(envcontract.TFConfig, tf)

	// A cluster manager that assigned devices already set CUDA_VISIBLE_DEVICES.
	if _, ok := env[envcontract.CUDAVisible]; !ok && len(t.Gpus) > 0 {
		ids := make([]string, len(t.Gpus))
		for i, g := range t.Gpus {
			ids[i] = strconv.Itoa(int(g))
		}
		set(envcontract.CUDAVisible, strings.Join(ids, ","))
	}
	return nil
}

// setRuntimeEnv sets where Python finds spindle, the Hadoop client's
// configuration and user, and unbuffered output.
func setRuntimeEnv(env map[string]string, set func(string, any), t *Task) error {
	py, err := pythonPath(t.PythonPath)
	if err != nil {
		return err
	}
	if py != "" {
		if old := env[envcontract.PythonPath]; old != "" {
			set(envcontract.PythonPath, py+string(os.PathListSeparator)+old)
		} else {
			set(envcontract.PythonPath, py)
		}
	}
	if t.HadoopConfDir != "" {
		set(envcontract.HadoopConfDir, t.HadoopConfDir)
	}
	if t.HadoopUser != "" {
		set(envcontract.HadoopUserName, t.HadoopUser)
	}
	// Unbuffered Python output, so lines reach the submit terminal as they happen.
	if _, ok := env[envcontract.PythonUnbuffered]; !ok {
		set(envcontract.PythonUnbuffered, 1)
	}
	return nil
}

// tfConfig renders TF_CONFIG for rank among addrs in a job of workers
// only: rank 0 is the chief, the others are workers.
func tfConfig(addrs []string, rank int) (string, error) {
	cfg := struct {
		Cluster map[string][]string `json:"cluster"`
		Task    tfTask              `json:"task"`
	}{Cluster: map[string][]string{"chief": addrs[:1]}}
	if len(addrs) > 1 {
		cfg.Cluster["worker"] = addrs[1:]
	}
	if rank == 0 {
		cfg.Task = tfTask{Type: "chief", Index: 0}
	} else {
		cfg.Task = tfTask{Type: "worker", Index: rank - 1}
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("encode TF_CONFIG: %w", err)
	}
	return string(b), nil
}

// pythonPath returns the directory to put on PYTHONPATH for `import
// spindle`: the configured one (spindle.python.path), else the package
// this binary carries, unpacked into the user's cache once per version.
func pythonPath(configured string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	return python.Dir()
}
