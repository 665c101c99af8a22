package jobview

import "time"

// Kind says what an Event records.
type Kind string

// The kinds of event.
const (
	// KindSubmitted opens a job's log: Info describes the job.
	KindSubmitted Kind = "submitted"
	// KindJobState records a job state change (State, Reason).
	KindJobState Kind = "job_state"
	// KindExecutor records an executor or rank change (Rank, Role,
	// RoleRank, Host, Executor, State, Message).
	KindExecutor Kind = "executor"
	// KindProgress is a rank's cumulative counters (Rank, Progress).
	KindProgress Kind = "progress"
	// KindScalars are values a training process reported (Rank, Step, Values).
	KindScalars Kind = "scalars"
	// KindLog is one line of a rank's output (Rank, Stream, Line).
	KindLog Kind = "log"
	// KindRestart records a new generation of the gang (Generation, Reason).
	KindRestart Kind = "restart"
	// KindReplace records one rank's lost process replaced alone while the
	// other ranks kept running (Rank, Reason).
	KindReplace Kind = "replace"
	// KindWebUI records where the job's web UI listens (Message: its URL).
	KindWebUI Kind = "web_ui"
	// KindModelSaved records a model version a rank published into the
	// model store (Rank, Model).
	KindModelSaved Kind = "model_saved"
	// KindRenumber records an elastic job going on without a lost rank in
	// place: Rank is the rank that left, Renumbered how every other rank's
	// number moved, Message says so in words.
	KindRenumber Kind = "renumber"
)

// Job states, as YARN and Spark report them.
const (
	StateSubmitted = "SUBMITTED"
	StateRunning   = "RUNNING"
	StateSucceeded = "SUCCEEDED"
	StateFailed    = "FAILED"
	StateKilled    = "KILLED"
)

// Executor and rank states.
const (
	RankPending = "pending"
	// RankLocalizing is a rank whose executor fetches and unpacks its
	// task's files (--files, --py-files, --archives); the rank's message
	// says how far it is.
	RankLocalizing = "localizing"
	RankRunning    = "running"
	RankFinished   = "finished"
	RankFailed     = "failed"
	RankStopped    = "stopped"
	RankLost       = "lost"
	// RankLeft is a rank an elastic job went on without in place; its
	// row is kept among the job's left ranks.
	RankLeft = "left"
)

// Event is one thing that happened to a job. Fields beyond Time and Kind
// are set by kind; the others stay empty and are left out of the log.
type Event struct {
	Time time.Time `json:"time"`
	Kind Kind      `json:"kind"`

	Info *Info `json:"info,omitempty"`

	State  string `json:"state,omitempty"`
	Reason string `json:"reason,omitempty"`

	Rank     int    `json:"rank,omitempty"`
	Role     string `json:"role,omitempty"`
	RoleRank int    `json:"role_rank,omitempty"`
	Host     string `json:"host,omitempty"`
	Executor string `json:"executor,omitempty"`
	Message  string `json:"message,omitempty"`

	Progress *Progress `json:"progress,omitempty"`

	Step   int64              `json:"step,omitempty"`
	Values map[string]float64 `json:"values,omitempty"`

	Stream string `json:"stream,omitempty"`
	Line   string `json:"line,omitempty"`

	Generation int `json:"generation,omitempty"`

	Renumbered []RankMove `json:"renumbered,omitempty"`

	Model *ModelRef `json:"model,omitempty"`
}

// ModelRef is a model version in the model store: spindle model show
// NAME/VERSION reads it, and URI is its directory.
type ModelRef struct {
	Name    string `json:"name"`
	Version int64  `json:"version"`
	URI     string `json:"uri"`
}

// Info describes a job when it is submitted.
type Info struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	User    string   `json:"user"`
	Mode    string   `json:"mode"` // local[N], spindle://..., yarn
	Command []string `json:"command"`
	// Settings are the job's effective configuration keys, with secrets
	// already hidden (see Redact).
	Settings map[string]string `json:"settings,omitempty"`
	// Roles maps each role to its number of ranks.
	Roles map[string]int `json:"roles,omitempty"`
	// WorldSize is the number of ranks of every role.
	WorldSize int `json:"world_size"`
	// Push is where the job takes pushed input; nil for other inputs.
	Push *PushInput `json:"push,omitempty"`
}

// PushInput is where a job takes pushed input (a flight-put: input): the
// Arrow Flight endpoint producers DoPut to, and the files on the driver's
// host that hold their token (never the token itself) and, with job TLS,
// the CA certificate they verify the endpoint with.
type PushInput struct {
	Endpoint  string `json:"endpoint"`
	TokenFile string `json:"token_file,omitempty"`
	CAFile    string `json:"ca_file,omitempty"`
}

// Progress is a rank's cumulative counters at one moment.
type Progress struct {
	Epoch       int64   `json:"epoch"`
	Rows        int64   `json:"rows"`
	Batches     int64   `json:"batches"`
	Bytes       int64   `json:"bytes"`
	Steps       int64   `json:"steps,omitempty"`
	CPUSeconds  float64 `json:"cpu_seconds,omitempty"`
	MemoryBytes int64   `json:"memory_bytes,omitempty"`
	// GPUs, GPUUtilRatio and GPUMemoryBytes are the use of the rank's
	// GPUs (as RankView has them); GPUs 0 says it is not known.
	GPUs           int     `json:"gpus,omitempty"`
	GPUUtilRatio   float64 `json:"gpu_util_ratio,omitempty"`
	GPUMemoryBytes int64   `json:"gpu_memory_bytes,omitempty"`
}
