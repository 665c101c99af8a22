package envcontract

import "time"

// Spindle's own variables.
const (
	Rank              = "SPINDLE_RANK"
	WorldSize         = "SPINDLE_WORLD_SIZE"
	LocalRank         = "SPINDLE_LOCAL_RANK"
	LocalWorldSize    = "SPINDLE_LOCAL_WORLD_SIZE"
	Role              = "SPINDLE_ROLE"
	RoleRank          = "SPINDLE_ROLE_RANK"
	RoleWorldSize     = "SPINDLE_ROLE_WORLD_SIZE"
	Roles             = "SPINDLE_ROLES"
	FeedMode          = "SPINDLE_FEED_MODE"
	Feed              = "SPINDLE_FEED"
	LabelColumn       = "SPINDLE_LABEL_COLUMN"
	JobID             = "SPINDLE_JOB_ID"
	CheckpointDir     = "SPINDLE_CHECKPOINT_DIR"
	CheckpointKeep    = "SPINDLE_CHECKPOINT_KEEP"
	Peers             = "SPINDLE_PEERS"
	PeersFile         = "SPINDLE_PEERS_FILE"
	PeerListenFD      = "SPINDLE_PEER_LISTEN_FD"
	PeerToken         = "SPINDLE_PEER_TOKEN"
	CollectiveTimeout = "SPINDLE_COLLECTIVE_TIMEOUT"
	CollectiveLink    = "SPINDLE_COLLECTIVE_LINK"
	Host              = "SPINDLE_HOST"
	FilesDir          = "SPINDLE_FILES_DIR"
)

// CheckpointService names the Unix socket of the executor's checkpoint
// service (HTTP: PUT and GET /checkpoint?dir=URI&name=NAME), set when the
// job has a checkpoint directory: how a process saves checkpoints where
// it cannot write itself (hdfs://).
const CheckpointService = "SPINDLE_CHECKPOINT_SERVICE"

// ModelsDir names the job's model store (spindle.models.dir): spindle
// submit passes it in the job's environment (as --env does) when one is
// configured, so it is around the contract rather than in it.
const ModelsDir = "SPINDLE_MODELS_DIR"

// ReportSocket names the executor's Unix datagram socket for reports: a
// process sends one JSON object per datagram ({"step": N, "values":
// {"loss": 0.3}}) and never waits; the values reach the job's web UI,
// event log and metrics with the next heartbeat.
const ReportSocket = "SPINDLE_REPORT_SOCKET"

// SlowLinkScalar starts the name of the value a rank reports for a slow
// link to a peer (the peer's rank follows): the probe round trip in
// milliseconds. The job page lists these as slow links, by pair.
const SlowLinkScalar = "collective.slow_link_ms.rank_"

// Generation and RestartCount count the job's restarts (both the same):
// 0 in the first gang, 1 after the first restart, and so on.
const (
	Generation   = "SPINDLE_GENERATION"
	RestartCount = "SPINDLE_RESTART_COUNT"
)

// Replacement counts the processes that ran this rank in this generation
// before this one: 0 for the gang's own, k for the kth started alone to
// replace a lost one while the other ranks kept running.
const Replacement = "SPINDLE_REPLACEMENT"

// Incarnations and Membership are the collective membership of a gang
// whose lost worker was replaced alone: Incarnations, at the start, how
// often each rank's process was replaced (comma-separated, rank order;
// Spindle's Go collectives read it), and Membership, in a job that
// replaces a lost worker alone (spindle.failure.replaceWorkers), the path
// of a JSON file the executor rewrites (atomically) whenever a rank is
// replaced while this process runs: {"version": N, "peers": ["host:port", ...],
// "incarnations": [...], "joined": R}. A survivor whose collective lost a
// rank waits for a version naming the rank's next incarnation and rejoins
// it in place (task.Env.Rejoin).
const (
	Incarnations = "SPINDLE_INCARNATIONS"
	Membership   = "SPINDLE_MEMBERSHIP"
)

// ResumeCheckpoint and ResumeStep name the checkpoint a generation
// resumes from: the newest one every rank finished saving with the
// checkpoint APIs (task.Checkpointer, spindle.Checkpointer). Unset when
// there is none: the process starts afresh.
const (
	ResumeCheckpoint = "SPINDLE_RESUME_CHECKPOINT"
	ResumeStep       = "SPINDLE_RESUME_STEP"
)

// FeedStartEpoch and FeedStartBatch are where this rank's feed starts when
// the generation resumes from a checkpoint: its first epoch is
// FeedStartEpoch, without the FeedStartBatch batches the checkpoint had
// consumed. Unset means 0.
const (
	FeedStartEpoch = "SPINDLE_FEED_START_EPOCH"
	FeedStartBatch = "SPINDLE_FEED_START_BATCH"
)

// FeedSplits names a JSON file describing this rank's splits, in the
// order the feed yields them, in the direct feed's format
// (docs/feed-protocol.md): in direct mode the same file as Feed. A
// process that must know where one split ends and the next begins in a
// pushed feed (spindle predict writes one output file per split) counts
// rows against it; with the shuffle off and evenBatches off the feed
// yields exactly those rows, in that order.
const FeedSplits = "SPINDLE_FEED_SPLITS"

// Timeline is "1" when the job records a timeline (spindle.timeline): the
// process then sends spans of its time to the report socket.
const Timeline = "SPINDLE_TIMELINE"

// The built-in parameter server's settings (spindle.ps.*), set on every
// rank of a job that runs it.
const (
	PSStaleness   = "SPINDLE_PS_STALENESS"
	PSWaitTimeout = "SPINDLE_PS_WAIT_TIMEOUT"
	PSMemory      = "SPINDLE_PS_MEMORY_MB"
	PSReplicas    = "SPINDLE_PS_REPLICAS"
	// PSRejoin is set to 1 on a replacement for a dead parameter server:
	// it rejoins the running servers' ring instead of starting one.
	PSRejoin = "SPINDLE_PS_REJOIN"
)

// PSSocket names the Unix socket of the executor's parameter-server proxy,
// set for the workers (and chief) of a job with the built-in parameter
// server: how a process that is not a Go program (the Python package's
// spindle.ps) pulls and pushes rows without holding the peer token
// (docs/ps-python.md).
const PSSocket = "SPINDLE_PS_SOCKET"

// The frameworks' variables, filled in from the same facts.
const (
	MasterAddr          = "MASTER_ADDR"
	MasterPort          = "MASTER_PORT"
	TorchRank           = "RANK"
	TorchWorldSize      = "WORLD_SIZE"
	TorchLocalRank      = "LOCAL_RANK"
	TorchLocalWorldSize = "LOCAL_WORLD_SIZE"
	GlooSocketIfname    = "GLOO_SOCKET_IFNAME"
	NCCLSocketIfname    = "NCCL_SOCKET_IFNAME"
	TFConfig            = "TF_CONFIG"
	CUDAVisible         = "CUDA_VISIBLE_DEVICES"
	PythonPath          = "PYTHONPATH"
	PythonUnbuffered    = "PYTHONUNBUFFERED"
	HadoopConfDir       = "HADOOP_CONF_DIR"
	HadoopUserName      = "HADOOP_USER_NAME"
)

// Variables around the contract rather than in it.
const (
	// JobSecret names the per-job secret among the secrets whoever
	// starts an executor hands it through an inherited pipe
	// (internal/secretfd), never its environment; it never reaches a
	// training process.
	JobSecret = "SPINDLE_JOB_SECRET"
	// JobTLS carries a job's TLS bundle (spindle.job.tls.enabled: the
	// job CA's certificate, the executors' client certificate and its
	// key, as PEM) the same way and with the same care as JobSecret.
	JobTLS = "SPINDLE_JOB_TLS"
	// PyArrow is set by users, not by Spindle: 0 makes the Python package
	// read Arrow data with its own reader even when pyarrow is installed.
	PyArrow = "SPINDLE_PYARROW"
	// Binary is set by users on a gateway: the spindle executable the
	// Python API (spindle.submit, spindle.run) runs instead of the one
	// beside the interpreter or on PATH.
	Binary = "SPINDLE_BINARY"
	// RunResults is set by spindle.run for the ranks it runs a function
	// on: which ranks print their return value for the caller to collect.
	RunResults = "SPINDLE_RUN_RESULTS"
	// SessionsDir is set by users on a gateway: where warm sessions
	// (spindle session, spindle.Session) keep their private directories.
	SessionsDir = "SPINDLE_SESSIONS_DIR"
	// SessionDir, SessionPreload and SessionJob are set by a warm session
	// for its ranks' pre-forked interpreters and the jobs they fork: the
	// session's private directory, the modules to import once, and the
	// job's number in the session (1, 2, ...).
	SessionDir     = "SPINDLE_SESSION_DIR"
	SessionPreload = "SPINDLE_SESSION_PRELOAD"
	SessionJob     = "SPINDLE_SESSION_JOB"
	// SessionEpochs is set by a warm session with input for its ranks:
	// the epochs each of its jobs reads. Job n reads the session feed's
	// epochs (n-1)*E to n*E-1, numbered 0 to E-1 for it.
	SessionEpochs = "SPINDLE_SESSION_EPOCHS"
	// SessionTokenFile is set by a warm session on a standalone cluster
	// for its ranks' pre-forked interpreters: the name, in
	// SPINDLE_FILES_DIR, of the file (shipped with the job) holding the
	// token that requests must carry when the rank runs away from the
	// session's directory and so serves them over TCP.
	SessionTokenFile = "SPINDLE_SESSION_TOKEN_FILE"
)

// DefaultCollectiveTimeout is how long a collective waits for a silent
// peer when SPINDLE_COLLECTIVE_TIMEOUT is unset, in Go and in Python
// alike, and the default of spindle.collective.timeout, which the
// executor passes on.
const DefaultCollectiveTimeout = 30 * time.Second

// Feed modes, the values of SPINDLE_FEED_MODE.
const (
	FeedArrow  = "arrow"
	FeedTensor = "tensor"
	FeedDirect = "direct"
	// FeedNone is the mode of a rank whose role gets no share of the
	// input (a parameter server); it has no SPINDLE_FEED.
	FeedNone = "none"
)

// FeedModes lists every value of SPINDLE_FEED_MODE.
var FeedModes = []string{FeedArrow, FeedTensor, FeedDirect, FeedNone}

// Roles a rank can have, the values of SPINDLE_ROLE.
const (
	RoleChief  = "chief"
	RoleWorker = "worker"
	RolePS     = "ps"
)

// Var describes one variable of the training-process environment.
type Var struct {
	// Name is the variable's name.
	Name string
	// ID names the variable in generated code: the Python package's
	// constant is ID in upper case.
	ID string
	// Default is what readers assume when the variable is unset or empty;
	// empty when there is none.
	Default string
	// Doc says what the variable holds, for the README's table; empty
	// puts the variable on the row of the one before it.
	Doc string
}

// Vars lists every variable an executor sets for its training process,
// in the README's order.
var Vars = []Var{
	{Name: Rank, ID: "rank", Doc: "this rank and the number of ranks"},
	{Name: WorldSize, ID: "world_size"},
	{Name: LocalRank, ID: "local_rank", Doc: "rank among the ranks on this host, and their number"},
	{Name: LocalWorldSize, ID: "local_world_size"},
	{Name: Role, ID: "role", Doc: "this rank's role (`chief`, `worker`, `ps`; `worker` in a job without roles), its rank among the ranks of that role, and their number"},
	{Name: RoleRank, ID: "role_rank"},
	{Name: RoleWorldSize, ID: "role_world_size"},
	{Name: Roles, ID: "roles", Doc: "every role of the job and its number of ranks, in rank order (`chief:1,worker:2,ps:1`)"},
	{Name: FeedMode, ID: "feed_mode", Doc: "`arrow`/`tensor`: path of the Unix socket to read epochs from (with `spindle.feed.sharedMemory`, the socket at that path plus `.shm` carries them through shared memory); `direct`: path of the JSON file listing this rank's splits ([docs/feed-protocol.md](docs/feed-protocol.md)); `none` (and no `SPINDLE_FEED`) for roles that get no input"},
	{Name: Feed, ID: "feed"},
	{Name: LabelColumn, ID: "label_column", Doc: "the label column, when `--label-column` is set"},
	{Name: JobID, ID: "job_id", Doc: "the job's id"},
	{Name: CheckpointDir, ID: "checkpoint_dir", Doc: "the checkpoint directory, when configured"},
	{Name: CheckpointKeep, ID: "checkpoint_keep", Default: "3", Doc: "how many complete checkpoints of each prefix the checkpoint APIs keep (`spindle.checkpoint.keep`), when a checkpoint directory is configured; `0` keeps every one"},
	{Name: CheckpointService, ID: "checkpoint_service", Doc: "the Unix socket of the executor's checkpoint service, when a checkpoint directory is configured: the Python package saves `hdfs://` checkpoints through it"},
	{Name: ReportSocket, ID: "report_socket", Doc: "the Unix datagram socket where the process reports values (`spindle.report(step=..., loss=...)`, `task.Report`): one JSON object per datagram, never waited on"},
	{Name: Generation, ID: "generation", Doc: "the gang's generation: 0 at first, one more at each restart or resize (`spindle.failure.policy restart` or `elastic`), and past the earlier gangs' when the checkpoint directory holds their records (YARN's next attempt, a job submitted again); the world size, peers and rendezvous variables are this generation's"},
	{Name: RestartCount, ID: "restart_count", Doc: "how many times the job was restarted (the same as `SPINDLE_GENERATION`, under torchrun's name)"},
	{Name: Replacement, ID: "replacement", Default: "0", Doc: "`0`, or `k` on the kth process started alone to replace this rank's lost one while the other ranks kept running (`spindle.failure.replaceWorkers`); it resumes from `SPINDLE_RESUME_CHECKPOINT` like a restarted gang's"},
	{Name: Incarnations, ID: "incarnations", Doc: "for Spindle's Go collectives: how often each rank's process was replaced alone in this generation (comma-separated, rank order), and, when the job replaces a lost worker alone, the path of a JSON file the executor rewrites when a rank is replaced while this process runs (`{\"version\": N, \"peers\": [...], \"incarnations\": [...], \"joined\": R}`): a survivor rejoins the replacement in place (`task.Env.Rejoin`; [docs/reliability.md](docs/reliability.md))"},
	{Name: Membership, ID: "membership"},
	{Name: ResumeCheckpoint, ID: "resume_checkpoint", Doc: "the checkpoint to resume from and its step, when the job has one that every rank finished saving with the checkpoint APIs (`task.Checkpointer`, `spindle.Checkpointer`); unset: start afresh"},
	{Name: ResumeStep, ID: "resume_step"},
	{Name: FeedStartEpoch, ID: "feed_start_epoch", Default: "0", Doc: "where this rank's feed starts when resuming: the first epoch served, and the batches of it already consumed (the feed leaves them out); the checkpoint APIs count positions from them"},
	{Name: FeedStartBatch, ID: "feed_start_batch", Default: "0"},
	{Name: FeedSplits, ID: "feed_splits", Doc: "path of a JSON file listing this rank's splits in feed order, in the direct feed's format (in `direct` mode the file `SPINDLE_FEED` names): with the shuffle and even batches off, a pushed feed yields exactly their rows in that order"},
	{Name: Timeline, ID: "timeline", Doc: "`1` when the job records a Chrome-trace timeline (`spindle.timeline`): Spindle's Python package and Go packages then send spans of the process's feed waits, collective operations and checkpoint saves to the report socket"},
	{Name: Peers, ID: "peers", Doc: "every rank's `host:port` (its peer port), in rank order, comma-separated"},
	{Name: PeersFile, ID: "peers_file", Doc: "set instead of `SPINDLE_PEERS` when the list would pass Linux's 128 KiB limit for one variable (thousands of ranks): a file, readable only by the job's user, holding exactly what `SPINDLE_PEERS` would; `task.FromEnv` and `spindle.peers()` read either"},
	{Name: PeerListenFD, ID: "peer_listen_fd", Doc: "descriptor of an already-bound listener on this rank's peer port (used by Spindle's Go collectives)"},
	{Name: PeerToken, ID: "peer_token", Doc: "the job's peer token (hex, derived from the job secret, the same on every rank), which authenticates the connections between ranks in Spindle's Go collectives; the job secret itself is never passed on"},
	{Name: CollectiveTimeout, ID: "collective_timeout", Default: "30",
		Doc: "seconds after which a silent peer fails a collective (`spindle.collective.timeout`; readers assume 30 when it is unset)"},
	{Name: CollectiveLink, ID: "collective_link", Default: "tcp",
		Doc: "the data link of Spindle's Go collectives and of the parameter server's pulls and pushes (`ucx`: over UCX where both ends offer it, for the collectives only where it brings RDMA between hosts and Spindle's own link elsewhere; `ucx:forced`: the collectives over UCX wherever both ends offer it), from `spindle.rdma.mode` and this rank's RDMA devices unless you set it: `ucx` (auto mode, a usable device), `ucx:required` (required mode), `ucx:declined` (auto mode, no usable device: this rank negotiates but keeps to TCP), unset (`tcp`) when the mode is off ([docs/rdma.md](docs/rdma.md))"},
	{Name: Host, ID: "host", Doc: "this rank's published address; where `--files` were copied"},
	{Name: FilesDir, ID: "files_dir"},
	{Name: PSStaleness, ID: "ps_staleness", Doc: "in a job with Spindle's parameter server (`--num-ps` without `--ps-command`): its consistency model (`bsp`, `asp` or a bound), how long a pull may wait for slow workers (seconds), and a server's memory in MiB; the servers are the ranks of role `ps`, on their `SPINDLE_PEERS` ports"},
	{Name: PSWaitTimeout, ID: "ps_wait_timeout"},
	{Name: PSMemory, ID: "ps_memory_mb"},
	{Name: PSReplicas, ID: "ps_replicas", Doc: "the number of backups of each row (`spindle.ps.replicas`)"},
	{Name: PSRejoin, ID: "ps_rejoin", Doc: "`1` on a parameter server started to replace a dead one: it rejoins the running servers' ring and gets its rows from them ([docs/ps.md](docs/ps.md))"},
	{Name: PSSocket, ID: "ps_socket", Doc: "the Unix socket of the executor's parameter-server proxy, on the workers of a job with Spindle's parameter server: `spindle.ps.connect()` reaches the servers through it ([docs/ps-python.md](docs/ps-python.md))"},
	{Name: MasterAddr, ID: "master_addr", Doc: "PyTorch's `env://` rendezvous (rank 0's service port)"},
	{Name: MasterPort, ID: "master_port"},
	{Name: TorchRank, ID: "torch_rank"},
	{Name: TorchWorldSize, ID: "torch_world_size"},
	{Name: TorchLocalRank, ID: "torch_local_rank"},
	{Name: TorchLocalWorldSize, ID: "torch_local_world_size"},
	{Name: GlooSocketIfname, ID: "gloo_socket_ifname", Doc: "the interface holding the published address"},
	{Name: NCCLSocketIfname, ID: "nccl_socket_ifname"},
	{Name: TFConfig, ID: "tf_config", Doc: "TensorFlow's cluster and this rank's task: every role under its name (`chief`, `worker`, `ps`); without roles, rank 0 is the `chief` and the others `worker` 0..N-2; left out (the executor logs it) when it would pass Linux's 128 KiB limit for one variable, thousands of ranks"},
	{Name: CUDAVisible, ID: "cuda_visible_devices", Doc: "this rank's GPUs, when `--executor-gpus` is set"},
	{Name: PythonPath, ID: "pythonpath", Doc: "starts with the directory of Spindle's Python package (`import spindle`): the package the `spindle` binary carries inside itself, unpacked once per version into `$XDG_CACHE_HOME/spindle/python/<hash>` (`~/.cache/...`; a private directory under `$TMPDIR` when there is no home), or `spindle.python.path` when set"},
	{Name: PythonUnbuffered, ID: "pythonunbuffered", Default: "1", Doc: "`1` unless set already, so Python's output reaches `spindle submit` line by line"},
	{Name: HadoopConfDir, ID: "hadoop_conf_dir", Doc: "the Hadoop client configuration and HDFS user, when configured"},
	{Name: HadoopUserName, ID: "hadoop_user_name"},
}

// Lookup returns the variable named name.
func Lookup(name string) (Var, bool) {
	for _, v := range Vars {
		if v.Name == name {
			return v, true
		}
	}
	return Var{}, false
}
