package driver

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/internal/config"
	"github.com/spindle-ml/spindle/observe/jobview"
)

// Config describes one job.
type Config struct {
	// JobID identifies the job; empty picks one.
	JobID   string
	AppName string

	// NumExecutors is the number of workers, the executors that are fed
	// and train; Cores, MemoryMB and GPUs are what each gets (the chief
	// gets the same).
	NumExecutors int
	Cores        int
	MemoryMB     int
	GPUs         int
	// Chief adds one executor with role chief: it runs Command without a
	// feed, and the job ends when it ends.
	Chief bool
	// PS describes the parameter servers (PS.Count 0: none). PS.Command
	// is their command; empty asks for Spindle's built-in server.
	PS RoleSpec

	// Inputs are URIs, paths or globs of the training data.
	Inputs      []string
	Format      feed.Format // empty: inferred per file
	Columns     []string
	LabelColumn string
	CSV         feed.CSVOptions
	// PartitionColumns are key=value directory keys read as columns.
	PartitionColumns []string
	// Flight reaches the Arrow Flight services of grpc:// inputs.
	Flight feed.FlightOptions
	// FlightPut shapes a flight-put: input (pushed by producers).
	FlightPut FlightPutConfig

	// Feed settings (see driverpb.FeedTask).
	FeedMode          string
	BatchRows         int
	Epochs            int
	Shuffle           bool
	Seed              int64
	ShuffleBufferRows int
	PrefetchBatches   int
	MemoryBudget      int64
	CacheMemory       int64
	// SpillDisk bounds the Flight splits' batches that outgrow CacheMemory
	// an executor keeps on its disk (feed.PipelineConfig.SpillBytes).
	SpillDisk   int64
	EvenBatches feed.EvenMode
	// SharedMemory offers epochs through shared memory as well as the socket.
	SharedMemory bool

	// Command is the training command run by every executor.
	Command []string
	Env     map[string]string
	Files   []string
	// Archives are .zip, .tar, .tar.gz/.tgz archives unpacked into the
	// process's working directory (--archives), each under its base name
	// or the alias after a '#' (env.tar.gz#env).
	Archives []string
	// ArchivesMaxBytes and ArchivesMaxEntries bound what one archive may
	// unpack on an executor's host (spindle.archives.maxBytes,
	// spindle.archives.maxEntries); 0 takes the executor's defaults.
	ArchivesMaxBytes   int64
	ArchivesMaxEntries int
	// PyFiles are .py, .zip and .egg files placed in the working
	// directory and put on PYTHONPATH (--py-files).
	PyFiles       []string
	Dir           string
	CheckpointDir string
	// CheckpointKeep is how many complete checkpoints of a prefix the
	// checkpoint APIs keep (spindle.checkpoint.keep); 0 keeps every one.
	CheckpointKeep int
	PythonPath     string
	// Python is the interpreter that runs a training command starting
	// with python or python3 (spindle.python); empty leaves it as given.
	Python string
	// JobTLS serves the control plane (and a flight-put: endpoint) with
	// TLS from a CA made for the job; executors present its client
	// certificate (spindle.job.tls.enabled).
	JobTLS bool
	// Timeout ends a job still running after this long (0: never).
	Timeout       time.Duration
	HadoopConfDir string
	HadoopUser    string
	// KerberosPrincipal and KerberosKeytab log the driver in to a
	// Kerberized Hadoop cluster; empty, the ticket cache is used.
	KerberosPrincipal, KerberosKeytab string

	// NetworkInterface picks the address ranks publish (empty: the one
	// that reaches the driver).
	NetworkInterface string
	// LogLevel is passed on to executors.
	LogLevel string

	// ListenHost is the address the driver listens on (its control plane
	// and web UI); AdvertiseHost is the one executors dial, empty meaning
	// the listening address.
	ListenHost, AdvertiseHost string
	// Port is the control-plane port; 0 picks a free one.
	Port int
	// AdvertisePort, when set, is the port executors dial instead of the
	// one the driver listens on (something forwards it).
	AdvertisePort int

	RegistrationTimeout time.Duration
	HeartbeatInterval   time.Duration
	HeartbeatTimeout    time.Duration
	StopGrace           time.Duration
	CollectiveTimeout   time.Duration
	StderrTailLines     int

	// RDMAMode and RDMADevices are spindle.rdma.mode and
	// spindle.rdma.devices, passed to every rank.
	RDMAMode, RDMADevices string

	// PSStaleness and PSWaitTimeout are spindle.ps.staleness and
	// spindle.ps.waitTimeout, for the built-in parameter servers.
	PSStaleness   string
	PSWaitTimeout time.Duration
	// PSReplicas is spindle.ps.replicas: with backups, a built-in
	// parameter server's death does not fail the job.
	PSReplicas int

	// Console shows the job's progress: a live line on a terminal,
	// elsewhere a line every ProgressInterval. Nil shows none.
	Console          *Console
	ProgressInterval time.Duration
	// ForceStop, when it closes, cuts the stop grace period short: a
	// second Ctrl-C stops every executor at once. Nil never closes.
	ForceStop <-chan struct{}
	// OnEvent, when set, sees every event of the job as it is recorded
	// (spindle submit --events-file). It is called from the driver's own
	// goroutines and must not block.
	OnEvent func(jobview.Event)

	// Mode names where the executors run (the master URL), for the job page.
	Mode string
	// Settings are the job's configuration keys and values as the job
	// page shows them (secret values are hidden there).
	Settings map[string]string
	// UIEnabled serves the job's web UI and /metrics on UIPort (or one of
	// the 16 after it; 0 picks any), on ListenHost.
	UIEnabled bool
	UIPort    int
	// UIBindHost is where the web UI listens (spindle.ui.bindHost);
	// empty: ListenHost.
	UIBindHost string
	// UIToken requires a per-job access token for the web UI
	// (spindle.ui.token).
	UIToken bool
	// EventLogDir, when set, is where the job writes its event log,
	// publishing new events every EventLogFlush.
	EventLogDir   string
	EventLogFlush time.Duration
	// TensorBoardDir, when set, is where the driver writes reported
	// values as TensorBoard event files, in a run directory per job.
	TensorBoardDir string
	// TensorBoardPublish is how often events are published to a
	// TensorBoardDir on HDFS.
	TensorBoardPublish time.Duration
	// FlushTimeout bounds finishing each of the job's records as it ends
	// (the event log, the TensorBoard events; zero: DefaultFlushTimeout).
	FlushTimeout time.Duration
	// FailurePolicy is PolicyFail or PolicyRestart; MaxRestarts bounds
	// the restarts of PolicyRestart.
	FailurePolicy string
	MaxRestarts   int
	// ReplaceWorkers, under PolicyRestart in a job of workers only,
	// replaces a lost worker alone while the others keep running.
	ReplaceWorkers bool
	// ShrinkInPlace, under PolicyElastic in a job of workers only and no
	// input, leaves a lost worker behind while the others keep running in
	// a smaller world (shrink.go).
	ShrinkInPlace bool
	// GrowInPlace, with ShrinkInPlace, lets newcomers join the running
	// workers of an elastic job without input (growinplace.go).
	GrowInPlace bool
	// MinExecutors is, under PolicyElastic, the fewest workers the job
	// runs with (NumExecutors is the most); 0 means NumExecutors.
	MinExecutors int
	// ElasticWait is how long an elastic job waits for room for more
	// executors than MinExecutors before it asks for fewer.
	ElasticWait time.Duration
	// MaxBlamelessRestarts bounds the restarts after losses that were not
	// the job's fault (Event.Blameless), which MaxRestarts does not count.
	MaxBlamelessRestarts int
	// HostMaxFailures is how many failures on one host keep the job's
	// later generations off it (ExecutorSpec.ExcludedHosts); 0 never does.
	HostMaxFailures int
	// Timeline, when set, is the file where the job's Chrome-trace
	// timeline is written (spindle.timeline).
	Timeline string

	Logger *slog.Logger
}

// FlightPutConfig shapes a flight-put: input: the schema producers must
// push (nil: the first producer's), the rows that end it (0: an
// end-of-input action does), the driver's buffer bound, and the file the
// producers' token is written to (empty: one in the temporary directory).
type FlightPutConfig struct {
	Schema      *arrow.Schema
	Rows        int64
	BufferBytes int64
	TokenFile   string
	// TurnEpochs, when positive, makes the input a warm session's: one
	// turn of pushed rows (one session job's) per TurnEpochs epochs
	// (push.Config.Turns).
	TurnEpochs int
}

// DefaultFlushTimeout is Config.FlushTimeout's default.
const DefaultFlushTimeout = 30 * time.Second

// DefaultConfig returns the built-in defaults: those of the config
// package's key table, which is where every default is set.
func DefaultConfig() Config {
	p, _, err := config.Load(config.Sources{})
	if err != nil {
		panic("driver: the built-in defaults do not load: " + err.Error())
	}
	cfg, _, err := ConfigFromProperties(p)
	if err != nil {
		panic("driver: the built-in defaults are invalid: " + err.Error())
	}
	return cfg
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("driver: invalid job")

// Validate checks the configuration and says what is wrong.
func (c *Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, a...))
	}
	for _, in := range c.Inputs {
		if (feed.IsFlightURI(in) || feed.IsFlightPutURI(in)) && c.FeedMode == "direct" {
			return bad("--input %s: an Arrow Flight stream is fed by the executors; use --feed arrow or tensor (direct mode reads files)", in)
		}
		if feed.IsFlightPutURI(in) {
			if len(c.Inputs) > 1 {
				return bad("--input %s: pushed input is the job's only input; drop the other --input", in)
			}
			if _, err := feed.ParseFlightPutURI(in); err != nil {
				return bad("%v", err)
			}
			if c.FailurePolicy == PolicyElastic {
				return bad("--input %s: a job whose input is pushed cannot be resized (each rank's pushed rows are its own); "+
					"set spindle.failure.policy=restart or fail", in)
			}
		}
	}
	if err := c.validateTurns(); err != nil {
		return err
	}
	if c.Timeline != "" {
		// Found now, not when the job has run for hours.
		if fi, err := os.Stat(filepath.Dir(c.Timeline)); err != nil || !fi.IsDir() {
			return bad("spindle.timeline %s: no directory %s to write it in", c.Timeline, filepath.Dir(c.Timeline))
		}
	}
	switch {
	case c.NumExecutors < 1:
		return bad("%d executors requested; a job needs at least 1 (--num-executors)", c.NumExecutors)
	case c.PS.Count < 0:
		return bad("%d parameter servers requested (--num-ps)", c.PS.Count)
	case c.PS.Count > 0 && (c.PS.Cores < 1 || c.PS.MemoryMB < 1 || c.PS.GPUs < 0):
		return bad("parameter servers need at least 1 core and 1 MiB each (spindle.ps.cores %d, spindle.ps.memory %d MiB, spindle.ps.gpus %d)",
			c.PS.Cores, c.PS.MemoryMB, c.PS.GPUs)
	case len(c.Command) == 0:
		return bad("no training command: put it after --, as in: spindle submit ... -- python train.py")
	case c.BatchRows < 1:
		return bad("batch rows %d: must be at least 1", c.BatchRows)
	case c.Epochs < 1:
		return bad("epochs %d: must be at least 1", c.Epochs)
	case c.HeartbeatInterval <= 0 || c.HeartbeatTimeout <= c.HeartbeatInterval:
		return bad("heartbeat timeout %s must be longer than the interval %s", c.HeartbeatTimeout, c.HeartbeatInterval)
	}
	switch c.FeedMode {
	case "arrow", "tensor", "direct":
	default:
		return bad("feed mode %q: want arrow, tensor or direct", c.FeedMode)
	}
	switch {
	case c.Port < 0 || c.Port > 65535:
		return bad("driver port %d: want 0 (any free port) to 65535", c.Port)
	case c.AdvertisePort > 0 && c.Port == 0:
		return bad("spindle.driver.advertisePort %d needs a fixed spindle.driver.port for it to forward to", c.AdvertisePort)
	case c.RegistrationTimeout <= 0:
		return bad("registration timeout %s: must be positive", c.RegistrationTimeout)
	case c.Timeout < 0:
		return bad("job timeout %s: must not be negative (0: no limit)", c.Timeout)
	}
	if err := c.checkElastic(); err != nil {
		return err
	}
	if err := c.checkEnv(); err != nil {
		return err
	}
	return c.checkShippedNames()
}

// checkElastic checks --num-executors MIN:MAX against the policy.
func (c *Config) checkElastic() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, a...))
	}
	if c.MinExecutors == 0 {
		c.MinExecutors = c.NumExecutors
	}
	switch {
	case c.MinExecutors < 1 || c.MinExecutors > c.NumExecutors:
		return bad("--num-executors %d:%d (spindle.failure.minExecutors): want 1 <= MIN <= MAX", c.MinExecutors, c.NumExecutors)
	case c.FailurePolicy != PolicyElastic && c.MinExecutors != c.NumExecutors:
		return bad("--num-executors %d:%d (spindle.failure.minExecutors %d) needs spindle.failure.policy elastic", c.MinExecutors, c.NumExecutors, c.MinExecutors)
	case c.GrowInPlace && !c.ShrinkInPlace:
		return bad("spindle.failure.growInPlace needs spindle.failure.shrinkInPlace=true (the newcomers join through the same membership)")
	case c.FailurePolicy != PolicyElastic && c.ShrinkInPlace:
		return bad("spindle.failure.shrinkInPlace needs spindle.failure.policy elastic (under restart, spindle.failure.replaceWorkers keeps the other ranks running)")
	case c.FailurePolicy != PolicyElastic:
		return nil
	case c.Chief || c.PS.Count > 0:
		return bad("spindle.failure.policy elastic runs workers only: a job with a chief or parameter servers cannot change its size")
	case c.FeedMode == "direct":
		return bad("spindle.failure.policy elastic needs --feed arrow or tensor: a direct-mode reader cannot take the rest of an epoch dealt by another world")
	case c.ElasticWait <= 0:
		return bad("spindle.failure.elasticWait %s: must be positive", c.ElasticWait)
	}
	return nil
}
