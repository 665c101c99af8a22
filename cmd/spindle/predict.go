package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/feed/plan"
	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/config"
	"github.com/spindle-ml/spindle/model/predict"
)

// predictKeys are the submit flags spindle predict takes: where and how
// large the job is, not how it is fed (predict decides that).
var predictKeys = []string{"master", "deploy-mode", "name", "num-executors", "executor-cores", "executor-memory",
	"queue", "principal", "keytab", "input-format", "batch-rows", "python", "log-level"}

func predictKeyFlags() []keyFlag {
	var out []keyFlag
	for _, f := range submitFlags {
		if slices.Contains(predictKeys, f.flag.Names()[0]) {
			out = append(out, f)
		}
	}
	return out
}

func predictCommand() *cli.Command {
	flags := append([]cli.Flag{
		&cli.StringFlag{Name: "model", Usage: "the ONNX model: a store's [STORE/]NAME[/VERSION] (the store spindle.models.dir when none is named), an .onnx file or a directory holding model.onnx; paths, file:// or hdfs:// URIs"},
		&cli.StringSliceFlag{Name: "input", Aliases: []string{"i"}, Usage: "data to score: a path, file:// or hdfs:// URI, a directory, a glob, or a grpc:// flight (repeatable)"},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "`DIR` (path, file:// or hdfs:// URI) for the scores, as Parquet; it must be empty or new"},
		&cli.StringFlag{Name: "keep", Usage: "comma-separated input columns copied into the output (default: every column not fed to the model)"},
		&cli.StringFlag{Name: "columns", Usage: "comma-separated columns making a model's single matrix input, in order (default: the manifest's, else the numeric columns not kept)"},
		&cli.StringFlag{Name: "label-column", Usage: "a `COLUMN` never taken as a feature by default (it is kept)"},
		&cli.BoolFlag{Name: "overwrite", Usage: "replace the files of a non-empty --output"},
	}, commonFlags(predictKeyFlags())...)
	return &cli.Command{
		Name:  "predict",
		Usage: "score a data set with an ONNX model on the cluster (batch inference)",
		Description: `Runs ONNX Runtime in every executor over its share of the input and
writes the input's key columns plus the model's outputs as Parquet, one
file per split, each published whole; the output directory gets _SUCCESS
when every row was written. A lost executor's splits are scored again and
replace their files (spindle.failure.policy restart), so no row is written
twice or left out.

   spindle predict --master local[2] --model models/churn/3 \
       --input hdfs:///data/customers/ --output hdfs:///scores/churn-3/

The executors run python3 -m spindle.predict, which needs pyarrow and
onnxruntime: name an interpreter that has them with --python.`,
		Flags:  flags,
		Action: runPredict,
	}
}

// predictJob is what spindle predict checked before submitting.
type predictJob struct {
	model    *predict.Model
	binding  predict.Binding
	output   string
	rows     int64
	specPath string
}

func runPredict(c *cli.Context) error {
	if c.NArg() > 0 {
		return cli.Exit(fmt.Sprintf("spindle predict takes no command (got %q): it runs the model itself", c.Args().First()), exitUsage)
	}
	for _, name := range []string{"model", "input", "output"} {
		if !c.IsSet(name) {
			return cli.Exit(fmt.Sprintf("spindle predict needs --%s", name), exitUsage)
		}
	}
	props, err := loadKeyFlags(c, predictKeyFlags())
	if err != nil {
		return cli.Exit(err, exitUsage)
	}
	if props.String(config.KeyFailurePolicy) == driver.PolicyElastic {
		return cli.Exit(fmt.Sprintf("%s: spindle predict cannot run elastic (its output files follow the splits of a fixed number of executors): use restart",
			props.Source(config.KeyFailurePolicy)), exitUsage)
	}
	base, _, err := driver.ConfigFromProperties(props)
	if err != nil {
		return cli.Exit(err, exitUsage)
	}
	tmp, err := os.MkdirTemp("", "spindle-predict-")
	if err != nil {
		return cli.Exit(fmt.Sprintf("make a temporary directory: %v", err), exitJobFailed)
	}
	defer os.RemoveAll(tmp)
	res := fsys.NewResolver(fsys.Options{HadoopConfDir: base.HadoopConfDir, User: base.HadoopUser,
		KerberosPrincipal: base.KerberosPrincipal, KerberosKeytab: base.KerberosKeytab, NoTokens: true})
	defer res.Close()
	job, err := checkPredict(c, base, props.String(config.KeyModelsDir), res, tmp)
	if err != nil {
		return err
	}
	props, err = loadKeyFlagsWith(c, predictKeyFlags(), predictSettings(props, job))
	if err != nil {
		return cli.Exit(err, exitUsage)
	}
	logger, err := newLogger(os.Stderr, props.String(config.KeyLogLevel))
	if err != nil {
		return cli.Exit(err, exitUsage)
	}
	// The driver runs python3 as spindle.python (--python) says.
	command := []string{"python3", "-m", predict.WorkerModule, predict.SpecFile}
	cfg, master, err := driverConfig(c, props, command, []string{job.model.Path, job.specPath})
	if err != nil {
		return cli.Exit(err, exitUsage)
	}
	if err := checkMasterSettings(props, master, cfg); err != nil {
		return cli.Exit(err, exitUsage)
	}
	if err := runJob(c, props, cfg, master, logger, nil); err != nil {
		return err
	}
	rows, err := predict.FinishOutput(c.Context, res, job.output, job.rows)
	if err != nil {
		return cli.Exit(fmt.Sprintf("spindle predict: %v", err), exitJobFailed)
	}
	fmt.Fprintf(os.Stderr, "wrote %d rows to %s\n", rows, job.output)
	return nil
}

// checkPredict resolves the model, reads the input's schema, binds one to
// the other, prepares the output and writes the workers' spec: all that
// can be refused (exit status 2) before anything runs.
func checkPredict(c *cli.Context, cfg driver.Config, storeDir string, res *fsys.Resolver, tmp string) (*predictJob, error) {
	ctx := c.Context
	inputs := c.StringSlice("input")
	for _, in := range inputs {
		if feed.IsFlightPutURI(in) {
			return nil, cli.Exit(fmt.Sprintf("--input %s: spindle predict scores data it can read again after a lost executor; pushed rows (flight-put:) cannot be", in), exitUsage)
		}
	}
	m, err := predict.LoadModel(ctx, res, c.String("model"), storeDir, tmp)
	if err != nil {
		return nil, predictExit(err)
	}
	jp, err := plan.Plan(ctx, res, feed.PlanRequest{Inputs: inputs, Format: cfg.Format, Ranks: 1, CSV: cfg.CSV,
		PartitionColumns: cfg.PartitionColumns, Flight: cfg.Flight, DealEndpoints: true})
	if err != nil {
		return nil, predictExit(err)
	}
	opts := predict.BindOptions{Source: strings.Join(inputs, ","), Features: splitList(c.String("columns")), Label: c.String("label-column")}
	if c.IsSet("keep") {
		opts.Keep = splitList(c.String("keep"))
	}
	b, err := predict.Bind(m.Signature, m.Manifest, jp.Schema, opts)
	if err != nil {
		return nil, predictExit(err)
	}
	for _, s := range b.Skipped {
		fmt.Fprintf(os.Stderr, "spindle: warning: model output %s is not a tensor; it is left out of the output\n", s)
	}
	output := c.String("output")
	if !strings.Contains(output, "://") {
		if output, err = filepath.Abs(output); err != nil {
			return nil, cli.Exit(fmt.Sprintf("--output %s: %v", c.String("output"), err), exitUsage)
		}
	}
	if err := predict.PrepareOutput(ctx, res, output, c.Bool("overwrite")); err != nil {
		return nil, predictExit(err)
	}
	job := &predictJob{model: m, binding: b, output: output, rows: jp.TotalRows, specPath: filepath.Join(tmp, predict.SpecFile)}
	spec := predict.Spec{Version: predict.SpecVersion, Model: filepath.Base(m.Path), Output: output, Threads: cfg.Cores, Binding: b}
	if err := predict.WriteSpec(job.specPath, spec); err != nil {
		return nil, cli.Exit(err, exitJobFailed)
	}
	return job, nil
}

// predictSettings are the feed settings batch inference needs: every row
// once, in split order, and the columns the workers read; a remote
// output as the checkpoint directory, so that workers publish hdfs://
// files through the executor's checkpoint service; restarts after a lost
// executor unless told otherwise.
func predictSettings(p *config.Properties, job *predictJob) []config.Setting {
	set := func(k, v string) config.Setting { return config.Setting{Key: k, Value: v, Source: "spindle predict"} }
	out := []config.Setting{
		set(config.KeyFeedMode, "arrow"),
		set(config.KeyEpochs, "1"),
		set(config.KeyShuffle, "false"),
		set(config.KeyEvenBatches, "off"),
		set(config.KeyLabelColumn, ""),
		set(config.KeyInputColumns, strings.Join(job.binding.Columns(), ",")),
	}
	if strings.Contains(job.output, "://") && !strings.HasPrefix(job.output, "file://") {
		out = append(out, set(config.KeyCheckpointDir, job.output))
	}
	if p.Level(config.KeyFailurePolicy) == config.LevelDefault {
		out = append(out, set(config.KeyFailurePolicy, driver.PolicyRestart))
	}
	if p.Level(config.KeyBatchRows) == config.LevelDefault {
		out = append(out, set(config.KeyBatchRows, strconv.Itoa(predictBatchRows)))
	}
	return out
}

// predictBatchRows is the default batch: large, as a model's per-call
// cost is paid per batch.
const predictBatchRows = 65536

// predictExit turns a check's error into spindle predict's exit: status 2
// for bad input, 1 otherwise.
func predictExit(err error) error {
	if errors.Is(err, predict.ErrBadInput) || isInputError(err) {
		return cli.Exit(strings.TrimPrefix(err.Error(), predict.ErrBadInput.Error()+": "), exitUsage)
	}
	return cli.Exit(fmt.Sprintf("spindle predict: %v", err), exitJobFailed)
}

// splitList splits a comma-separated flag value, dropping empty parts.
func splitList(v string) []string {
	var out []string
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
