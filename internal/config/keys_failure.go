package config

// Names of the keys of what a job does when it fails.
const (
	KeyFailurePolicy      = "spindle.failure.policy"
	KeyFailureMaxRestarts = "spindle.failure.maxRestarts"
	// KeyFailureMaxBlamelessRestarts bounds the restarts after losses that
	// were not the job's fault, which maxRestarts does not count.
	KeyFailureMaxBlamelessRestarts = "spindle.failure.maxBlamelessRestarts"
	// KeyFailureHostMaxFailures is how many failures on one host keep the
	// job's later generations off it.
	KeyFailureHostMaxFailures = "spindle.failure.hostMaxFailures"
	// KeyFailureMinExecutors is the fewest workers of an elastic job
	// (--num-executors MIN:MAX sets it and spindle.executor.instances).
	KeyFailureMinExecutors = "spindle.failure.minExecutors"
	// KeyFailureElasticWait bounds an elastic job's wait for more room.
	KeyFailureElasticWait = "spindle.failure.elasticWait"
	// KeyFailureReplaceWorkers replaces one lost worker alone under the
	// restart policy, instead of restarting every rank.
	KeyFailureReplaceWorkers = "spindle.failure.replaceWorkers"
	// KeyFailureShrinkInPlace keeps an elastic job's surviving processes
	// running when a worker is lost, instead of restarting them smaller.
	KeyFailureShrinkInPlace = "spindle.failure.shrinkInPlace"
	// KeyFailureGrowInPlace lets newcomers join an elastic job's running
	// processes when the cluster has room, instead of restarting them at
	// a checkpoint to grow.
	KeyFailureGrowInPlace = "spindle.failure.growInPlace"
)

// failureKeys say how a job survives failures.
var failureKeys = []Key{
	{Name: KeyFailurePolicy, Default: "fail", Kind: Enum, Enum: []string{"fail", "restart", "elastic"}, ReadBy: ReadBySubmit,
		Doc: "What a failure does to the job: fail ends it; restart stops every rank and starts a new gang (SPINDLE_GENERATION and SPINDLE_RESTART_COUNT one higher) whose processes resume from the newest complete checkpoint, each rank's feed where it stood, up to spindle.failure.maxRestarts times; elastic (with --num-executors MIN:MAX) does the same with the survivors, down to MIN workers, dealing the rest of the epoch among them. Bad input, a timeout or Ctrl-C are never restarted."},
	{Name: KeyFailureMaxRestarts, Default: "3", Kind: Int, Min: 0, HasMin: true, ReadBy: ReadBySubmit,
		Doc: "How many times spindle.failure.policy restart restarts a job before its failure is final. Losses that were not the job's fault (a YARN container preempted or its node lost, a standalone worker that left) are not counted; see spindle.failure.maxBlamelessRestarts."},
	{Name: KeyFailureMaxBlamelessRestarts, Default: "10", Kind: Int, Min: 0, HasMin: true, ReadBy: ReadBySubmit,
		Doc: "How many times spindle.failure.policy restart restarts a job after losses that were not its fault (preemption, a lost node, a standalone worker that left), which spindle.failure.maxRestarts does not count, before such a loss is final."},
	{Name: KeyFailureReplaceWorkers, Default: "false", Kind: Bool, ReadBy: ReadBySubmit,
		Doc: "Under spindle.failure.policy restart, in a job of workers only, a lost worker is replaced by one new executor that resumes from the newest complete checkpoint, its feed where that checkpoint left the rank, while the other ranks keep running; each replacement counts as a restart. Go trainers that allreduce with Spindle's collectives through task.Env.Rejoin (examples/logreg) wait at the step that failed and rejoin the replacement in place. When it cannot happen (another rank fails meanwhile, as the peers of a lost rank in a gloo or NCCL group do, or no executor can be started) every rank is restarted instead."},
	{Name: KeyFailureShrinkInPlace, Default: "false", Kind: Bool, ReadBy: ReadBySubmit,
		Doc: "Under spindle.failure.policy elastic, in a job without --input, a lost worker leaves the others running: the driver hands them a smaller membership (SPINDLE_MEMBERSHIP, ranks renumbered in their old order) and Go trainers that allreduce through task.Env.Rejoin re-form the world in place with the same processes; each such shrink counts as a restart. Where it cannot happen (a job with input, survivors at MIN, another rank failing within 2 s, as the peers of a lost rank in a gloo or NCCL group do) the gang restarts smaller as without it."},
	{Name: KeyFailureGrowInPlace, Default: "false", Kind: Bool, ReadBy: ReadBySubmit,
		Doc: "With spindle.failure.shrinkInPlace, in an elastic job running below spindle.executor.instances (with --input: fed arrow or tensor under even batches), the driver starts a newcomer executor whenever the cluster has room (local[N]: a free slot; checked every spindle.failure.elasticWait) and appends its rank after the running ranks', which keep their processes: Go trainers form the bigger world at a step boundary (task.Env.Grow) and hand the newcomer their state (task.CatchUp). With input, the newcomer joins at an epoch's end: the running feeds read the bigger world's plan from the next epoch, and trainers call task.Env.Grow at each epoch's end. Not counted as a restart."},
	{Name: KeyFailureMinExecutors, Default: "0", Kind: Int, Min: 0, HasMin: true, ReadBy: ReadBySubmit,
		Doc: "Under spindle.failure.policy elastic, the fewest workers the job runs with (spindle.executor.instances is the most); --num-executors MIN:MAX sets both. 0 means spindle.executor.instances."},
	{Name: KeyFailureElasticWait, Default: "10s", Kind: Duration, ReadBy: ReadBySubmit,
		Doc: "How long an elastic job waits for room for more than its fewest workers before it asks for one fewer; also how often a smaller elastic job asks the standalone masters for room to grow."},
	{Name: KeyFailureHostMaxFailures, Default: "2", Kind: Int, Min: 0, HasMin: true, ReadBy: ReadBySubmit,
		Doc: "After this many failures of the job's ranks or executors on one host (not counting losses that were not the job's fault), later generations are not placed on that host (standalone and YARN; local mode has one host). 0 never keeps a host out."},
}
