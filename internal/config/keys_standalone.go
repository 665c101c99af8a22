package config

// Names of the standalone cluster manager's keys: the cluster's security
// settings (masters, workers and drivers), the masters', the placement
// policy, and the workers'.
const (
	KeyClusterSecret     = "spindle.cluster.secret"
	KeyClusterSecretFile = "spindle.cluster.secretFile"
	KeyClusterTLSCert    = "spindle.cluster.tls.certFile"
	KeyClusterTLSKey     = "spindle.cluster.tls.keyFile"
	KeyClusterTLSCA      = "spindle.cluster.tls.caFile"

	KeyMasterID                 = "spindle.master.id"
	KeyMasterAddr               = "spindle.master.addr"
	KeyMasterRaftAddr           = "spindle.master.raftAddr"
	KeyMasterPeers              = "spindle.master.peers"
	KeyMasterDataDir            = "spindle.master.dataDir"
	KeyMasterHeartbeatTimeout   = "spindle.master.raft.heartbeatTimeout"
	KeyMasterElectionTimeout    = "spindle.master.raft.electionTimeout"
	KeyMasterLeaderLeaseTimeout = "spindle.master.raft.leaderLeaseTimeout"
	KeyMasterCommitTimeout      = "spindle.master.raft.commitTimeout"
	KeyMasterSnapshotInterval   = "spindle.master.raft.snapshotInterval"
	KeyMasterSnapshotThreshold  = "spindle.master.raft.snapshotThreshold"
	KeyMasterTrailingLogs       = "spindle.master.raft.trailingLogs"
	KeyMasterSnapshotRetain     = "spindle.master.raft.snapshotRetain"
	KeyMasterWorkerTimeout      = "spindle.master.workerTimeout"
	KeyMasterWorkerGoneTimeout  = "spindle.master.workerGoneTimeout"
	KeyMasterAppTimeout         = "spindle.master.appTimeout"
	KeyMasterLaunchTimeout      = "spindle.master.launchTimeout"
	KeyMasterRetainedApps       = "spindle.master.retainedApps"

	KeyStandalonePlacement          = "spindle.standalone.placement"
	KeyStandaloneMaxExecutorsPerApp = "spindle.standalone.maxExecutorsPerApp"
	KeyStandaloneMaxCoresPerApp     = "spindle.standalone.maxCoresPerApp"
	KeyStandaloneGangTimeout        = "spindle.standalone.gangTimeout"

	KeyWorkerID                = "spindle.worker.id"
	KeyWorkerMasters           = "spindle.worker.masters"
	KeyWorkerAddr              = "spindle.worker.addr"
	KeyWorkerAdvertiseHost     = "spindle.worker.advertiseHost"
	KeyWorkerCores             = "spindle.worker.cores"
	KeyWorkerMemory            = "spindle.worker.memory"
	KeyWorkerGPUs              = "spindle.worker.gpus"
	KeyWorkerWorkDir           = "spindle.worker.workDir"
	KeyWorkerHeartbeatInterval = "spindle.worker.heartbeatInterval"
	KeyWorkerStopGracePeriod   = "spindle.worker.stopGracePeriod"
	KeyWorkerCleanupDelay      = "spindle.worker.cleanupDelay"
	KeyWorkerLogMaxSize        = "spindle.worker.log.maxSize"
	KeyWorkerLogMaxFiles       = "spindle.worker.log.maxFiles"
	KeyWorkerCgroups           = "spindle.worker.cgroups"
	KeyWorkerCgroupRoot        = "spindle.worker.cgroupRoot"
	KeyWorkerCgroupParent      = "spindle.worker.cgroupParent"
	KeyMasterMetricsAddr       = "spindle.master.metricsAddr"
	KeyWorkerMetricsAddr       = "spindle.worker.metricsAddr"
)

// standaloneKeys are the keys of the standalone cluster manager's masters
// and workers.
var standaloneKeys = []Key{
	{Name: KeyClusterSecret, Default: "", Kind: String,
		Doc: "The standalone cluster's shared secret (at least 16 bytes), the same on every master, worker and driver; every call between them is signed with it. Prefer spindle.cluster.secretFile or $SPINDLE_CLUSTER_SECRET, which keep it out of properties files."},
	{Name: KeyClusterSecretFile, Default: "", Kind: String,
		Doc: "A file holding the cluster secret; it must not be readable by group or others (chmod 600). Takes precedence over spindle.cluster.secret and $SPINDLE_CLUSTER_SECRET."},
	{Name: KeyClusterTLSCert, Default: "", Kind: String,
		Doc: "PEM certificate of this master, worker or driver; with keyFile and caFile it turns on mutual TLS for gRPC and Raft connections."},
	{Name: KeyClusterTLSKey, Default: "", Kind: String,
		Doc: "PEM private key for spindle.cluster.tls.certFile."},
	{Name: KeyClusterTLSCA, Default: "", Kind: String,
		Doc: "PEM CA certificate(s) that sign every cluster member's certificate."},

	{Name: KeyMasterID, Default: "", Kind: String,
		Doc: "This master's id in the Raft group (spindle master --id)."},
	{Name: KeyMasterAddr, Default: "0.0.0.0:7077", Kind: HostPort,
		Doc: "Where the master's gRPC API listens (workers, drivers and admin commands connect here)."},
	{Name: KeyMasterRaftAddr, Default: "127.0.0.1:7001", Kind: HostPort,
		Doc: "Where the master's Raft transport listens. Connections are authenticated with the cluster secret but only encrypted with TLS configured: bind it to a private network."},
	{Name: KeyMasterPeers, Default: "", Kind: List,
		Doc: "Every master of the group, this one included, as id=raft-host:port@grpc-host:port, comma-separated; empty runs a group of one."},
	{Name: KeyMasterDataDir, Default: "", Kind: String,
		Doc: "Directory of the master's Raft log, stable store and snapshots; a master restarted on it keeps the cluster state."},
	{Name: KeyMasterHeartbeatTimeout, Default: "150ms", Kind: Duration,
		Doc: "Raft heartbeat timeout: a follower that hears nothing from the leader this long starts an election."},
	{Name: KeyMasterElectionTimeout, Default: "150ms", Kind: Duration,
		Doc: "Raft election timeout: how long a candidate waits before trying again."},
	{Name: KeyMasterLeaderLeaseTimeout, Default: "150ms", Kind: Duration,
		Doc: "Raft leader lease: a leader that cannot reach a quorum this long steps down. At most the heartbeat timeout."},
	{Name: KeyMasterCommitTimeout, Default: "50ms", Kind: Duration,
		Doc: "Raft commit timeout: the longest a leader waits before sending an empty append to followers."},
	{Name: KeyMasterSnapshotInterval, Default: "30s", Kind: Duration,
		Doc: "How often a master checks whether to snapshot the cluster state and compact its Raft log."},
	{Name: KeyMasterSnapshotThreshold, Default: "2048", Kind: Int, Min: 1, HasMin: true,
		Doc: "Raft entries since the last snapshot that make the next check take one."},
	{Name: KeyMasterTrailingLogs, Default: "1024", Kind: Int, Min: 1, HasMin: true,
		Doc: "Raft entries kept after a snapshot, so slow followers catch up without a full snapshot."},
	{Name: KeyMasterSnapshotRetain, Default: "2", Kind: Int, Min: 1, HasMin: true,
		Doc: "Snapshot files kept in the data directory."},
	{Name: KeyMasterWorkerTimeout, Default: "5s", Kind: Duration,
		Doc: "A worker silent this long is declared lost; its executors are marked lost and their drivers told."},
	{Name: KeyMasterWorkerGoneTimeout, Default: "2s", Kind: Duration, ZeroOK: true,
		Doc: "A worker whose connection from the leading master closed, that refuses new ones and has not heartbeated for this long is declared lost at once (its process died), without waiting out spindle.master.workerTimeout; 0 waits for that timeout only."},
	{Name: KeyMasterAppTimeout, Default: "30s", Kind: Duration,
		Doc: "An application whose driver is silent this long is ended and its executors stopped."},
	{Name: KeyMasterLaunchTimeout, Default: "30s", Kind: Duration,
		Doc: "Longest time one executor launch on a worker may take."},
	{Name: KeyMasterRetainedApps, Default: "200", Kind: Int, Min: 1, HasMin: true,
		Doc: "Ended applications the cluster state remembers (for spindle status)."},

	{Name: KeyStandalonePlacement, Default: "spread", Kind: Enum, Enum: []string{"spread", "pack"},
		Doc: "How masters place a gang's executors on workers: spread (fewest executors of the application, then most free cores, first) or pack (fill the fullest worker that fits first)."},
	{Name: KeyStandaloneMaxExecutorsPerApp, Default: "0", Kind: Int, Min: 0, HasMin: true,
		Doc: "Most executors one application may hold at once on the standalone cluster; 0 means no cap."},
	{Name: KeyStandaloneMaxCoresPerApp, Default: "0", Kind: Int, Min: 0, HasMin: true,
		Doc: "Most cores one application may hold at once on the standalone cluster; 0 means no cap."},
	{Name: KeyStandaloneGangTimeout, Default: "120s", Kind: Duration, ReadBy: ReadBySubmit | ReadByMaster,
		Doc: "How long a gang waits in the masters' queue for room before the request fails with what was missing."},

	{Name: KeyWorkerID, Default: "", Kind: String,
		Doc: "This worker's id; empty uses its advertised host and port."},
	{Name: KeyWorkerMasters, Default: "", Kind: List,
		Doc: "The masters' gRPC addresses (host:port), comma-separated; give all of them."},
	{Name: KeyWorkerAddr, Default: "0.0.0.0:7078", Kind: HostPort,
		Doc: "Where the worker's gRPC service listens (masters connect here to launch executors)."},
	{Name: KeyWorkerAdvertiseHost, Default: "", Kind: String,
		Doc: "The host masters and drivers use to reach this worker and its executors; empty uses the host of spindle.worker.addr, or the machine's name."},
	{Name: KeyWorkerCores, Default: "0", Kind: Int, Min: 0, HasMin: true,
		Doc: "Cores the worker offers to executors; 0 offers every CPU."},
	{Name: KeyWorkerMemory, Default: "0", Kind: Bytes,
		Doc: "Memory the worker offers to executors, like 64g; 0 offers all but 1 GiB."},
	{Name: KeyWorkerGPUs, Default: "-1", Kind: Int, Min: -1, HasMin: true,
		Doc: "GPUs the worker offers; -1 counts /dev/nvidiaN. Executors see theirs in CUDA_VISIBLE_DEVICES."},
	{Name: KeyMasterMetricsAddr, Default: "", Kind: String, ReadBy: ReadByMaster,
		Doc: "HOST:PORT where the master serves Prometheus metrics at /metrics (leadership, Raft term, workers, applications and executors by state, queued gangs, capacity and use); empty serves none."},
	{Name: KeyWorkerMetricsAddr, Default: "", Kind: String, ReadBy: ReadByWorker,
		Doc: "HOST:PORT where the worker serves Prometheus metrics at /metrics (capacity, executors by state, how they exited); empty serves none."},
	{Name: KeyWorkerWorkDir, Default: "", Kind: String,
		Doc: "Directory of executors' working directories and logs; empty uses $TMPDIR/spindle-worker."},
	{Name: KeyWorkerHeartbeatInterval, Default: "1s", Kind: Duration,
		Doc: "How often the worker reports to the masters; keep it well under spindle.master.workerTimeout."},
	{Name: KeyWorkerStopGracePeriod, Default: "5s", Kind: Duration, ZeroOK: true,
		Doc: "Time an executor gets between SIGTERM and SIGKILL when the worker stops it on its own account."},
	{Name: KeyWorkerCleanupDelay, Default: "24h", Kind: Duration, ZeroOK: true,
		Doc: "How long an ended application's directory, with its executors' logs, is kept."},
	{Name: KeyWorkerLogMaxSize, Default: "128m", Kind: Bytes, Min: 0, HasMin: true,
		Doc: "Size at which an executor's stdout or stderr file is rotated (moved to stdout.1, ...); 0 never rotates."},
	{Name: KeyWorkerLogMaxFiles, Default: "4", Kind: Int, Min: 0, HasMin: true,
		Doc: "Rotated files kept per executor stream; older output is dropped (spindle logs then starts at the oldest kept)."},
	{Name: KeyWorkerCgroups, Default: "true", Kind: Bool,
		Doc: "Run executors in cgroup v2 groups with CPU (cpu.max) and memory (memory.max) limits where the machine allows; the worker logs why when it cannot."},
	{Name: KeyWorkerCgroupRoot, Default: "/sys/fs/cgroup", Kind: String,
		Doc: "Where the cgroup v2 hierarchy is mounted."},
	{Name: KeyWorkerCgroupParent, Default: "", Kind: String,
		Doc: "The cgroup (relative to the root) under which executors' cgroups are made, with cpu and memory delegated; empty uses the worker's own."},
}
