package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/feed/wire"
	"github.com/spindle-ml/spindle/internal/config"
	"github.com/spindle-ml/spindle/internal/gpu"
	"github.com/spindle-ml/spindle/model/store"
	"github.com/spindle-ml/spindle/standalone"
	"github.com/spindle-ml/spindle/yarn"
)

// Exit statuses of spindle submit.
const (
	exitJobFailed   = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// submitFlags maps each explicit flag to the configuration key it sets.
var submitFlags = []keyFlag{
	{&cli.StringFlag{Name: "master", Usage: "where executors run: local, local[N], spindle://host:port,... (standalone masters)"}, config.KeyMaster},
	{&cli.StringFlag{Name: "deploy-mode", Usage: "where the driver runs: client (here) or cluster (in the YARN ApplicationMaster; --master yarn)"}, config.KeyDeployMode},
	{&cli.StringFlag{Name: "name", Usage: "job `NAME` shown in logs and status"}, config.KeyAppName},
	{&cli.StringFlag{Name: "num-executors", Usage: "number of executors, one training rank each (default 2); MIN:MAX for spindle.failure.policy elastic"}, config.KeyExecutorInstances},
	{&cli.StringFlag{Name: "executor-cores", Usage: "CPU cores per executor"}, config.KeyExecutorCores},
	{&cli.StringFlag{Name: "executor-memory", Usage: "memory per executor, like 4g"}, config.KeyExecutorMemory},
	{&cli.StringFlag{Name: "executor-gpus", Usage: "GPUs per executor"}, config.KeyExecutorGPUs},
	{&cli.BoolFlag{Name: "chief", Usage: "run one more executor as the job's chief (SPINDLE_ROLE=chief, TF_CONFIG chief): no feed, and the job ends when it does"}, config.KeyChiefEnabled},
	{&cli.StringFlag{Name: "num-ps", Usage: "`N` parameter servers (SPINDLE_ROLE=ps, TF_CONFIG ps), stopped when the job ends; with --ps-command they run CMD"}, config.KeyPSInstances},
	{&cli.StringFlag{Name: "ps-command", Usage: "the `CMD` parameter servers run instead of the training command, as in \"python3 ps.py --port 0\" (quoted words as in a shell)"}, config.KeyPSCommand},
	{&cli.StringFlag{Name: "ps-cores", Usage: "CPU cores per parameter server"}, config.KeyPSCores},
	{&cli.StringFlag{Name: "ps-memory", Usage: "memory per parameter server, like 4g"}, config.KeyPSMemory},
	{&cli.StringFlag{Name: "ps-gpus", Usage: "GPUs per parameter server"}, config.KeyPSGPUs},
	{&cli.StringFlag{Name: "queue", Usage: "YARN queue"}, config.KeyQueue},
	{&cli.StringFlag{Name: "principal", Usage: "Kerberos principal to log in as, with --keytab (a Kerberized Hadoop cluster; default: the ticket cache kinit filled)"}, config.KeyKerberosPrincipal},
	{&cli.StringFlag{Name: "keytab", Usage: "keytab of --principal"}, config.KeyKerberosKeytab},
	{&cli.StringFlag{Name: "input-format", Usage: "parquet, arrow or csv (default: from each file's extension)"}, config.KeyInputFormat},
	{&cli.StringFlag{Name: "columns", Usage: "comma-separated columns to feed (default: all)"}, config.KeyInputColumns},
	{&cli.StringFlag{Name: "label-column", Usage: "label `COLUMN`, fed last"}, config.KeyLabelColumn},
	{&cli.StringFlag{Name: "feed", Usage: "how training processes get data: arrow, tensor or direct (default arrow)"}, config.KeyFeedMode},
	{&cli.StringFlag{Name: "batch-rows", Usage: "rows per fed batch (default 1024)"}, config.KeyBatchRows},
	{&cli.StringFlag{Name: "epochs", Usage: "passes over the data (default 1)"}, config.KeyEpochs},
	{&cli.BoolFlag{Name: "shuffle", Usage: "shuffle split order and rows each epoch"}, config.KeyShuffle},
	{&cli.StringFlag{Name: "seed", Usage: "shuffle seed"}, config.KeySeed},
	{&cli.StringFlag{Name: "checkpoint-dir", Usage: "checkpoint `DIR` (path, file:// or hdfs:// URI), given to training as SPINDLE_CHECKPOINT_DIR"}, config.KeyCheckpointDir},
	{&cli.StringFlag{Name: "python", Usage: "Python `INTERPRETER` that runs a training command starting with python or python3 (may point into an --archives alias: env/bin/python)"}, config.KeyPython},
	{&cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error (the driver's and executors' logs)"}, config.KeyLogLevel},
}

func submitCommand() *cli.Command {
	flags := append([]cli.Flag{
		&cli.StringSliceFlag{Name: "input", Aliases: []string{"i"}, Usage: "training data: a path, file:// or hdfs:// URI, a directory or a glob (repeatable)"},
		&cli.StringSliceFlag{Name: "env", Usage: "set `K=V` in every training process's environment (repeatable)"},
		&cli.StringSliceFlag{Name: "files", Usage: "copy `URI` into every training process's $SPINDLE_FILES_DIR (repeatable or comma-separated)"},
		&cli.StringSliceFlag{Name: "archives", Usage: "unpack `ARCHIVE[#ALIAS]` (.zip, .tar, .tar.gz, .tgz) into every training process's working directory, under ALIAS or its base name (repeatable or comma-separated)"},
		&cli.StringSliceFlag{Name: "py-files", Usage: "place `FILE` (.py, .zip, .egg) in every training process's working directory and on its PYTHONPATH (repeatable or comma-separated)"},
		&cli.StringFlag{Name: "session", Usage: "run COMMAND (python SCRIPT, -m MODULE or -c CODE) in the warm ranks of session `ID` (spindle session start), each in a process forked for this run"},
		&cli.StringFlag{Name: "events-file", Usage: "write the job's events as JSON lines to `FILE` while it runs, the last saying how it ended (failed rank, its stderr tail): for programs driving spindle submit"},
	}, commonFlags(submitFlags)...)
	return &cli.Command{
		Name:      "submit",
		Usage:     "run a training job",
		ArgsUsage: "-- COMMAND [ARGS...]",
		Description: `Runs COMMAND as N training processes (ranks), each fed its share of the
input as Arrow record batches, and waits for all of them. The job succeeds
(exit status 0) only when every rank exits 0.

Example, on this machine with 2 ranks:

   spindle submit --master local[2] --input data/ --label-column label \
       --feed tensor --epochs 3 -- python3 train.py

Configuration, lowest precedence first: built-in defaults,
$SPINDLE_CONF_DIR/spindle-defaults.conf, --properties-file, --conf, flags.
See conf/spindle-defaults.conf.template for every key.

Training processes find their data and peers in the environment:
SPINDLE_RANK, SPINDLE_WORLD_SIZE, SPINDLE_FEED, SPINDLE_FEED_MODE,
SPINDLE_PEERS, MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE (PyTorch), TF_CONFIG.`,
		Flags:  flags,
		Action: runSubmit,
	}
}

func runSubmit(c *cli.Context) error {
	if id := c.String("session"); id != "" {
		return submitToSession(c, id)
	}
	path := c.String("events-file")
	if path == "" {
		return submit(c, nil)
	}
	events, err := openEvents(path)
	if err != nil {
		return cli.Exit(err, exitUsage)
	}
	err = submit(c, events)
	if !events.closed {
		// Stopped before the job ran: the result is the exit's message.
		msg, code := "", 0
		if err != nil {
			msg, code = err.Error(), exitCode(err)
		}
		_ = events.finish("", nil, msg, code)
	}
	return err
}

// submit runs one job; events, when not nil, gets its events and result.
func submit(c *cli.Context, events *eventsFile) error {
	command := c.Args().Slice()
	if len(command) == 0 {
		return cli.Exit("no training command: put it after --, as in: spindle submit --input data/ -- python3 train.py", exitUsage)
	}
	props, err := loadKeyFlags(c, submitFlags)
	if err != nil {
		return cli.Exit(err, exitUsage)
	}
	logger, err := newLogger(os.Stderr, props.String(config.KeyLogLevel))
	if err != nil {
		return cli.Exit(err, exitUsage)
	}
	cfg, master, err := driverConfig(c, props, command, nil)
	if err != nil {
		return cli.Exit(err, exitUsage)
	}
	if err := checkMasterSettings(props, master, cfg); err != nil {
		return cli.Exit(err, exitUsage)
	}
	return runJob(c, props, cfg, master, logger, events)
}

// runJob runs the job cfg describes on master, in this process or (YARN
// cluster mode) in an ApplicationMaster, and returns the cli.Exit that
// says how it ended; nil when it succeeded. spindle submit and spindle
// predict share it.
func runJob(c *cli.Context, props *config.Properties, cfg driver.Config, master driver.Master, logger *slog.Logger, events *eventsFile) error {
	if props.String(config.KeyDeployMode) == "cluster" {
		if master.Kind != driver.MasterYARN {
			return cli.Exit(fmt.Sprintf("%s: --deploy-mode cluster runs the driver in a YARN ApplicationMaster and needs --master yarn (master is %s)",
				props.Source(config.KeyDeployMode), props.String(config.KeyMaster)), exitUsage)
		}
		return runYARNCluster(c.Context, props, cfg, logger)
	}
	cfg.Logger = logger
	terminal := term.IsTerminal(int(os.Stderr.Fd()))
	cfg.Console = driver.NewConsole(os.Stdout, os.Stderr, terminal)
	cfg.ForceStop = forceStop
	if events != nil {
		cfg.OnEvent = events.record
	}

	cm, err := newClusterManager(c.Context, master, props, cfg, logger)
	if err != nil {
		if errors.Is(err, standalone.ErrConfig) || errors.Is(err, standalone.ErrSecretOnCommandLine) ||
			errors.Is(err, yarn.ErrConfig) || errors.Is(err, yarn.ErrUnreachable) ||
			status.Code(err) == codes.Unauthenticated {
			return cli.Exit(err, exitUsage)
		}
		return cli.Exit(fmt.Sprintf("connect to %s: %v", props.String(config.KeyMaster), err), exitJobFailed)
	}
	defer cm.Close()
	// One id for the job: the cluster's application id when it gives one.
	if namer, ok := cm.(driver.JobNamer); ok {
		id, err := namer.JobID(c.Context)
		if err != nil {
			return cli.Exit(fmt.Sprintf("connect to %s: %v", props.String(config.KeyMaster), err), exitJobFailed)
		}
		cfg.JobID = id
	}

	d, err := driver.New(cfg, cm)
	if err != nil {
		return cli.Exit(err, exitUsage)
	}
	defer d.Close()
	logger.Info("submitting job", "job", d.JobID(), "name", cfg.AppName, "master", props.String(config.KeyMaster),
		"executors", cfg.NumExecutors, "feed", cfg.FeedMode)
	runErr := d.Run(c.Context)
	if k, ok := cm.(interface {
		Killed(context.Context) (string, bool)
	}); ok && runErr != nil && c.Context.Err() == nil {
		// Executors lost because someone killed the application: say so.
		if msg, killed := k.Killed(c.Context); killed {
			return cli.Exit(msg, yarn.ExitKilled)
		}
	}
	// Cluster managers that report the job's outcome (YARN's final
	// status) learn it before Close.
	if r, ok := cm.(interface{ SetResult(error) }); ok {
		r.SetResult(runErr)
	}
	msg, code := jobOutcome(runErr, d.JobID(), cfg)
	if events != nil {
		if err := events.finish(d.JobID(), runErr, msg, code); err != nil {
			fmt.Fprintf(os.Stderr, "spindle: warning: %v\n", err)
		}
	}
	if code != 0 {
		return cli.Exit(msg, code)
	}
	fmt.Fprintln(os.Stderr, msg)
	return nil
}

// jobOutcome is what spindle submit says about a job's result, and its
// exit status: 0 succeeded, 1 failed or timed out, 2 bad input found
// before anything ran, 130 interrupted (143, yarn.ExitKilled: its YARN
// application was killed).
func jobOutcome(err error, jobID string, cfg driver.Config) (string, int) {
	switch {
	case err == nil:
		return fmt.Sprintf("job %s succeeded", jobID), 0
	case errors.Is(err, driver.ErrTimedOut):
		return fmt.Sprintf("job %s timed out after %s (spindle.job.timeout); every executor was stopped", jobID, cfg.Timeout), exitJobFailed
	case errors.Is(err, driver.ErrInterrupted):
		return "job interrupted; every executor was stopped", exitInterrupted
	case isInputError(err), errors.Is(err, standalone.ErrNeverFits):
		return err.Error(), exitUsage
	}
	return fmt.Sprintf("job %s failed: %v", jobID, err), exitJobFailed
}

// isInputError reports whether err is about the job's input or settings
// (found before anything ran) rather than a failure while running.
func isInputError(err error) bool {
	return errors.Is(err, feed.ErrInput) || errors.Is(err, driver.ErrConfig) || errors.Is(err, wire.ErrNotNumeric)
}

// driverConfig turns properties and flags into the driver's Config;
// files are shipped besides --files.
func driverConfig(c *cli.Context, p *config.Properties, command, files []string) (driver.Config, driver.Master, error) {
	cfg, master, err := driver.ConfigFromProperties(p)
	if err != nil {
		return cfg, master, err
	}
	cfg.Inputs = c.StringSlice("input")
	cfg.Command = command
	cfg.Env = map[string]string{}
	for _, kv := range c.StringSlice("env") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return cfg, master, fmt.Errorf("--env %q: want K=V", kv)
		}
		cfg.Env[k] = v
	}
	cfg.Files = append(listFlag(c, "files"), files...)
	cfg.Archives = listFlag(c, "archives")
	cfg.PyFiles = listFlag(c, "py-files")
	wd, err := os.Getwd()
	if err != nil {
		return cfg, master, fmt.Errorf("find the working directory: %w", err)
	}
	// Local executors run training where the user submitted from; on a
	// cluster they run in the executor's own working directory.
	if master.Kind == driver.MasterLocal {
		cfg.Dir = wd
	}
	for _, note := range cfg.ShipCommand(wd, master.Kind == driver.MasterLocal) {
		fmt.Fprintln(os.Stderr, note)
	}
	// A relative checkpoint directory means the one under the submit's
	// working directory, wherever the executors run.
	if lp, ok := localCheckpointDir(cfg.CheckpointDir); ok && !filepath.IsAbs(lp) {
		cfg.CheckpointDir = filepath.Join(wd, lp)
	}
	// The model store reaches the training process as SPINDLE_MODELS_DIR
	// (spindle.model.save publishes there), unless --env sets it.
	if dir := p.String(config.KeyModelsDir); dir != "" {
		if _, set := cfg.Env[store.EnvDir]; !set {
			if lp, ok := localCheckpointDir(dir); ok && !filepath.IsAbs(lp) {
				dir = filepath.Join(wd, lp)
			}
			cfg.Env[store.EnvDir] = dir
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, master, err
	}
	return cfg, master, cfg.ResolveShipped(wd)
}

// listFlag returns a repeatable flag's values, each split at commas.
func listFlag(c *cli.Context, name string) []string {
	var out []string
	for _, f := range c.StringSlice(name) {
		for _, part := range strings.Split(f, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

// gpuRoot is where local jobs look for /dev/nvidiaN.
var gpuRoot = "/"

// checkMasterSettings refuses, or warns about, settings that the chosen
// cluster manager cannot honour.
func checkMasterSettings(p *config.Properties, master driver.Master, cfg driver.Config) error {
	if master.Kind != driver.MasterYARN && p.Level(config.KeyQueue) > config.LevelDefaultsFile {
		fmt.Fprintf(os.Stderr, "spindle: warning: %s: the queue (%s) applies to --master yarn only; ignored with master %s\n",
			p.Source(config.KeyQueue), config.KeyQueue, p.String(config.KeyMaster))
	}
	if need := cfg.TotalGPUs(); master.Kind == driver.MasterLocal && need > 0 {
		have, err := gpu.Count(gpuRoot)
		if err != nil {
			have = 0
		}
		if need > have && need == cfg.GPUs*cfg.NumExecutors {
			return fmt.Errorf("%s: %d executors with %d GPUs each need %d GPUs; this machine has %d (/dev/nvidiaN)",
				p.Source(config.KeyExecutorGPUs), cfg.NumExecutors, cfg.GPUs, need, have)
		}
		if need > have {
			return fmt.Errorf("%s, %s: the job's executors need %d GPUs (%d per worker or chief, %d per parameter server); this machine has %d (/dev/nvidiaN)",
				p.Source(config.KeyExecutorGPUs), p.Source(config.KeyPSGPUs), need, cfg.GPUs, cfg.PS.GPUs, have)
		}
	}
	return nil
}

// localCheckpointDir returns the local path of a checkpoint directory
// that names one (a path or file:// URI; not hdfs://).
func localCheckpointDir(dir string) (string, bool) {
	if dir == "" {
		return "", false
	}
	if rest, ok := strings.CutPrefix(dir, "file://"); ok {
		return rest, true
	}
	if strings.Contains(dir, "://") {
		return "", false
	}
	return dir, true
}
