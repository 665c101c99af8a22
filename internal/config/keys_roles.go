package config

// Names of the keys of a job's roles besides its workers: the chief and
// the parameter servers. The workers are spindle.executor.*.
const (
	KeyChiefEnabled = "spindle.chief.enabled"

	KeyPSInstances = "spindle.ps.instances"
	KeyPSCores     = "spindle.ps.cores"
	KeyPSMemory    = "spindle.ps.memory"
	KeyPSGPUs      = "spindle.ps.gpus"
	KeyPSCommand   = "spindle.ps.command"

	KeyPSStaleness   = "spindle.ps.staleness"
	KeyPSWaitTimeout = "spindle.ps.waitTimeout"
	KeyPSReplicas    = "spindle.ps.replicas"
)

// roleKeys are the keys of the chief and parameter-server roles.
var roleKeys = []Key{
	{Name: KeyChiefEnabled, Default: "false", Kind: Bool,
		Doc: "Run one more executor as the job's chief (SPINDLE_ROLE=chief, TensorFlow's chief task), with the executor resources and the training command. It gets no feed, and the job ends when it does: executors still running are then stopped."},

	{Name: KeyPSInstances, Default: "0", Kind: Int, Min: 0, HasMin: true,
		Doc: "Parameter servers (executors with SPINDLE_ROLE=ps, TensorFlow's ps tasks). They get no feed, are expected to run until the job ends and are then stopped; one that fails before fails the job. With spindle.ps.command they run that command; without it, Spindle's built-in parameter server (docs/ps.md)."},
	{Name: KeyPSCores, Default: "1", Kind: Int, Min: 1, HasMin: true,
		Doc: "CPU cores per parameter server, requested from the cluster manager."},
	{Name: KeyPSMemory, Default: "1g", Kind: Bytes, Min: 1 << 20, HasMin: true,
		Doc: "Memory per parameter server, requested from the cluster manager."},
	{Name: KeyPSGPUs, Default: "0", Kind: Int, Min: 0, HasMin: true,
		Doc: "GPUs per parameter server."},
	{Name: KeyPSCommand, Default: "", Kind: String,
		Doc: "The command parameter servers run instead of the training command, split into words as a shell would (quotes and backslashes; no variables or globs); empty runs Spindle's built-in parameter server."},
	{Name: KeyPSStaleness, Default: "bsp", Kind: String,
		Doc: "The built-in parameter server's consistency model: bsp (every worker finishes step n before any pulls for step n+1), asp (no waiting), or a number s of steps a worker may run ahead of the slowest (SSP)."},
	{Name: KeyPSReplicas, Default: "1", Kind: Int, Min: 0, HasMin: true,
		Doc: "Backups of every sparse row of the built-in parameter server, on the next servers of the ring: a push is acknowledged once they have it, and when a server dies its keys move to their backups and the job goes on (with fewer backups than servers minus one). 0 keeps one copy: a server's death fails the job."},
	{Name: KeyPSWaitTimeout, Default: "10m", Kind: Duration,
		Doc: "How long a built-in parameter server lets a pull wait for slow workers while no worker's clock moves; the pull then fails naming the workers it waited for."},
}
