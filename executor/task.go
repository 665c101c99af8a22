package executor

import (
	"github.com/spindle-ml/spindle/feed"
)

// Task is what the driver asks an executor to do: run one training
// process and feed it. The driver sends it as JSON in the Register reply.
type Task struct {
	JobID string `json:"job_id"`
	// Command is the training command and its arguments.
	Command []string `json:"command"`
	// Env is added to the training process's environment (--env).
	Env map[string]string `json:"env,omitempty"`
	// Dir is the working directory of the training process; empty means
	// the executor's own working directory.
	Dir string `json:"dir,omitempty"`
	// Files are URIs copied into the process's files directory (--files).
	Files []string `json:"files,omitempty"`
	// Archives are "URI#alias" archives unpacked into the files directory
	// under alias and linked into the working directory (--archives).
	Archives []string `json:"archives,omitempty"`
	// PyFiles are URIs copied like Files and put on PYTHONPATH (--py-files).
	PyFiles []string `json:"py_files,omitempty"`
	// Python replaces a command's python or python3 (spindle.python).
	Python string `json:"python,omitempty"`
	// CheckpointDir is given to the process as SPINDLE_CHECKPOINT_DIR.
	CheckpointDir string `json:"checkpoint_dir,omitempty"`
	// PythonPath is prepended to PYTHONPATH so `import spindle` works.
	PythonPath string `json:"python_path,omitempty"`
	// HadoopConfDir and HadoopUser configure HDFS access.
	HadoopConfDir string `json:"hadoop_conf_dir,omitempty"`
	HadoopUser    string `json:"hadoop_user,omitempty"`

	Feed FeedTask `json:"feed"`

	// HeartbeatIntervalMillis is how often to heartbeat.
	HeartbeatIntervalMillis int64 `json:"heartbeat_interval_ms"`
	// DriverTimeoutMillis is how long the executor keeps going without
	// reaching the driver before it stops its process and gives up.
	DriverTimeoutMillis int64 `json:"driver_timeout_ms"`
	// StopGraceMillis is the time between SIGTERM and SIGKILL.
	StopGraceMillis int64 `json:"stop_grace_ms"`
	// StderrTailLines is how many stderr lines to keep for error reports.
	StderrTailLines int `json:"stderr_tail_lines"`
	// CollectiveTimeoutMillis becomes SPINDLE_COLLECTIVE_TIMEOUT.
	CollectiveTimeoutMillis int64 `json:"collective_timeout_ms"`
	// GPUs are the device indices this rank may use (CUDA_VISIBLE_DEVICES).
	GPUs []int `json:"gpus,omitempty"`
}

// FeedTask says how to feed the training process.
type FeedTask struct {
	Mode              string          `json:"mode"` // arrow, tensor or direct
	Splits            []feed.Split    `json:"splits"`
	SchemaIPC         []byte          `json:"schema_ipc"` // the planned schema as an Arrow IPC schema message
	Columns           []string        `json:"columns,omitempty"`
	LabelColumn       string          `json:"label_column,omitempty"`
	CSV               feed.CSVOptions `json:"csv"`
	BatchRows         int             `json:"batch_rows"`
	Epochs            int             `json:"epochs"`
	Shuffle           bool            `json:"shuffle"`
	Seed              int64           `json:"seed"`
	ShuffleBufferRows int             `json:"shuffle_buffer_rows"`
	PrefetchBatches   int             `json:"prefetch_batches"`
	MemoryBudget      int64           `json:"memory_budget"`
	CacheBytes        int64           `json:"cache_bytes"`
	EvenBatches       string          `json:"even_batches"`
	TargetBatches     int64           `json:"target_batches"`
	// EpochRows is the rows the rank yields per epoch under even batches
	// (feed.EvenRows); zero means TargetBatches full batches.
	EpochRows int64 `json:"epoch_rows,omitempty"`
}
