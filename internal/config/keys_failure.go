package config

// Names of the keys of what a job does when it fails.
const (
	KeyFailurePolicy      = "spindle.failure.policy"
	KeyFailureMaxRestarts = "spindle.failure.maxRestarts"
)

// failureKeys say how a job survives failures.
var failureKeys = []Key{
	{Name: KeyFailurePolicy, Default: "fail", Kind: Enum, Enum: []string{"fail", "restart"}, ReadBy: ReadBySubmit,
		Doc: "What a failure does to the job: fail ends it; restart stops every rank and starts a new gang (SPINDLE_GENERATION and SPINDLE_RESTART_COUNT one higher) whose processes resume from their latest checkpoints, up to spindle.failure.maxRestarts times. Bad input, a timeout or Ctrl-C are never restarted."},
	{Name: KeyFailureMaxRestarts, Default: "3", Kind: Int, Min: 0, HasMin: true, ReadBy: ReadBySubmit,
		Doc: "How many times spindle.failure.policy restart restarts a job before its failure is final."},
}
