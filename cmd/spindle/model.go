package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/config"
	"github.com/spindle-ml/spindle/model/convert"
	"github.com/spindle-ml/spindle/model/onnx"
	"github.com/spindle-ml/spindle/model/store"
	"github.com/spindle-ml/spindle/task"
)

// modelStoreFlag names the store, overriding spindle.models.dir.
var modelStoreFlag = keyFlag{&cli.StringFlag{Name: "store", Usage: "the model store `DIR` (path or hdfs:// URI; default spindle.models.dir)"}, config.KeyModelsDir}

func modelCommand() *cli.Command {
	return &cli.Command{
		Name:        "model",
		Usage:       "export models to ONNX and read the model store (docs/models.md)",
		Subcommands: []*cli.Command{modelExportCommand(), modelListCommand(), modelShowCommand(), modelPublishCommand()},
	}
}

// modelEnv is what every model command needs: its configuration and a
// resolver reaching the store's file system.
type modelEnv struct {
	storeDir string
	res      *fsys.Resolver
}

func newModelEnv(c *cli.Context) (*modelEnv, error) {
	p, err := loadKeyFlags(c, []keyFlag{modelStoreFlag})
	if err != nil {
		return nil, cli.Exit(err, exitUsage)
	}
	return &modelEnv{storeDir: p.String(config.KeyModelsDir), res: fsys.NewResolver(fsys.Options{
		HadoopConfDir: p.String(config.KeyHadoopConfDir), User: p.String(config.KeyHadoopUser)})}, nil
}

// modelExit maps an error to the exit status: 2 for what the user named
// wrong (a missing model, checkpoint or table), 1 otherwise.
func modelExit(err error) error {
	if err == nil {
		return nil
	}
	for _, bad := range []error{fs.ErrNotExist, store.ErrNoModel, store.ErrNoVersion, store.ErrNoStore, store.ErrBadName, convert.ErrNotCheckpoint, convert.ErrNoTable, convert.ErrMismatch} {
		if errors.Is(err, bad) {
			return cli.Exit(err.Error(), exitUsage)
		}
	}
	return cli.Exit(err.Error(), exitJobFailed)
}

func modelExportCommand() *cli.Command {
	return &cli.Command{
		Name:      "export",
		Usage:     "export a checkpoint of Spindle's own trainers (logreg, parameter-server tables) to ONNX",
		ArgsUsage: "CHECKPOINT",
		Description: "CHECKPOINT is examples/logreg's logreg.json (or the job's checkpoint directory holding it), or\n" +
			"parameter-server tables: one clock-N checkpoint, the directory the job checkpoints them into,\n" +
			"or a job checkpoint directory with them under ps/. Writes model.onnx (and model.data when the\n" +
			"tensors are large) with manifest.json into --out, and/or publishes the next version of --name.",
		Flags: commonFlags([]keyFlag{modelStoreFlag,
			{&cli.StringFlag{Name: "format", Value: "onnx", Usage: "the model format: onnx"}, ""},
			{&cli.StringFlag{Name: "out", Usage: "write the model into `DIR` (path or hdfs:// URI)"}, ""},
			{&cli.StringFlag{Name: "name", Usage: "publish the model as the next version of `NAME` in the store"}, ""},
			{&cli.StringFlag{Name: "table", Usage: "the parameter-server `TABLE` to export (default: the only one)"}, ""},
			{&cli.StringFlag{Name: "combiner", Value: convert.CombineSum, Usage: "how a row's embeddings combine: sum or mean"}, ""},
			{&cli.BoolFlag{Name: "sigmoid", Usage: "apply the logistic function to a table's combined embedding (a sparse logistic regression)"}, ""},
			{&cli.StringFlag{Name: "columns", Usage: "the feed's feature `COLUMNS` (comma-separated), recorded in the manifest"}, ""},
			{&cli.StringFlag{Name: "label-column", Usage: "the feed's label `COLUMN`, recorded in the manifest"}, ""},
			{&cli.StringFlag{Name: "job-id", Usage: "the job that wrote the checkpoint, recorded in the manifest"}, ""},
			{&cli.StringFlag{Name: "external-data-threshold", Value: "1g", Usage: "tensor `BYTES` kept inside model.onnx; larger tables go to model.data (ONNX external data)"}, ""},
		}),
		Action: modelExport,
	}
}

func modelExport(c *cli.Context) error {
	args, err := positionalArgs(c)
	if err != nil {
		return cli.Exit(err, exitUsage)
	}
	if len(args) != 1 {
		return cli.Exit("spindle model export: want one CHECKPOINT", exitUsage)
	}
	if f := c.String("format"); f != "onnx" {
		return cli.Exit(fmt.Sprintf("spindle model export: --format %q: only onnx", f), exitUsage)
	}
	out, name := c.String("out"), c.String("name")
	if out == "" && name == "" {
		return cli.Exit("spindle model export needs --out DIR or --name NAME (or both)", exitUsage)
	}
	if name != "" {
		if err := store.CheckName(name); err != nil {
			return cli.Exit("--name: "+err.Error(), exitUsage)
		}
	}
	if cb := c.String("combiner"); cb != convert.CombineSum && cb != convert.CombineMean {
		return cli.Exit(fmt.Sprintf("--combiner %q: want sum or mean", cb), exitUsage)
	}
	threshold, err := config.ParseBytes(c.String("external-data-threshold"))
	if err != nil {
		return cli.Exit("--external-data-threshold: "+err.Error(), exitUsage)
	}
	env, err := newModelEnv(c)
	if err != nil {
		return err
	}
	defer env.res.Close()
	opts := convert.ExportOptions{Table: c.String("table"), TableOptions: convert.TableOptions{Combiner: c.String("combiner"), Sigmoid: c.Bool("sigmoid")},
		Label: c.String("label-column"), JobID: c.String("job-id"), SpindleVersion: currentBuild().Version}
	if cols := c.String("columns"); cols != "" {
		opts.Columns = strings.Split(cols, ",")
	}
	ex, err := convert.Checkpoint(c.Context, env.res, args[0], opts)
	if err != nil {
		return modelExit(err)
	}
	srcs, err := onnx.Encode(ex.Model, threshold)
	if err != nil {
		return modelExit(err)
	}
	if out != "" {
		f, dir, err := env.res.Resolve(c.Context, out)
		if err != nil {
			return cli.Exit(fmt.Sprintf("--out %s: %v", out, err), exitUsage)
		}
		if _, err := store.WriteDir(c.Context, f, dir, srcs, ex.Manifest); err != nil {
			return modelExit(err)
		}
		fmt.Fprintf(c.App.Writer, "exported %s -> %s\n", ex.What, out)
	}
	if name != "" {
		s, err := store.OpenURI(c.Context, env.res, env.storeDir)
		if err != nil {
			return cli.Exit(err.Error(), exitUsage)
		}
		v, err := s.Publish(c.Context, name, srcs, ex.Manifest)
		if err != nil {
			return modelExit(err)
		}
		reportModel(v)
		fmt.Fprintf(c.App.Writer, "published %s as %s -> %s\n", ex.What, v.Ref(), v.URI)
	}
	return nil
}

func modelListCommand() *cli.Command {
	return &cli.Command{
		Name:   "list",
		Usage:  "list the store's models: name, versions, and the latest version's creation time and job",
		Flags:  commonFlags([]keyFlag{modelStoreFlag}),
		Action: modelList,
	}
}

func modelList(c *cli.Context) error {
	env, err := newModelEnv(c)
	if err != nil {
		return err
	}
	defer env.res.Close()
	s, err := store.OpenURI(c.Context, env.res, env.storeDir)
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	names, err := s.List(c.Context)
	if err != nil {
		return modelExit(err)
	}
	w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tVERSIONS\tLATEST\tCREATED\tJOB")
	for _, n := range names {
		vs, err := s.Versions(c.Context, n)
		if err != nil {
			return modelExit(err)
		}
		if len(vs) == 0 {
			fmt.Fprintf(w, "%s\t0\t-\t-\t-\n", n)
			continue
		}
		v, err := s.Resolve(c.Context, fmt.Sprintf("%s/%d", n, vs[len(vs)-1]))
		if err != nil {
			return modelExit(err)
		}
		job := v.Manifest.JobID
		if job == "" {
			job = "-"
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\n", n, len(vs), v.Number, v.Manifest.Created, job)
	}
	return w.Flush()
}

func modelShowCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "print a model version's manifest (the latest version when none is given)",
		ArgsUsage: "[STORE/]NAME[/VERSION]",
		Flags:     commonFlags([]keyFlag{modelStoreFlag}),
		Action:    modelShow,
	}
}

func modelShow(c *cli.Context) error {
	args, err := positionalArgs(c)
	if err != nil {
		return cli.Exit(err, exitUsage)
	}
	if len(args) != 1 {
		return cli.Exit("spindle model show: want one [STORE/]NAME[/VERSION]", exitUsage)
	}
	env, err := newModelEnv(c)
	if err != nil {
		return err
	}
	defer env.res.Close()
	v, err := resolveModel(c.Context, env, args[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "# %s at %s\n", v.Ref(), v.URI)
	b, _ := json.MarshalIndent(v.Manifest, "", "  ")
	fmt.Fprintf(c.App.Writer, "%s\n", b)
	return nil
}

// resolveModel finds the version ref names, in the store it names or the
// default one.
func resolveModel(ctx context.Context, env *modelEnv, ref string) (*store.Version, error) {
	s, in, err := store.OpenRef(ctx, env.res, env.storeDir, ref)
	if err != nil {
		return nil, cli.Exit(err.Error(), exitUsage)
	}
	v, err := s.Resolve(ctx, in)
	if err != nil {
		return nil, modelExit(err)
	}
	return v, nil
}

func modelPublishCommand() *cli.Command {
	return &cli.Command{
		Name:      "publish",
		Usage:     "publish a directory holding model.onnx as the next version of a model (what spindle.model.save runs)",
		ArgsUsage: "DIR",
		Flags: commonFlags([]keyFlag{modelStoreFlag,
			{&cli.StringFlag{Name: "name", Usage: "the model's `NAME` (required)"}, ""},
			{&cli.StringFlag{Name: "manifest", Usage: "a manifest.json `FILE` to start from (job, feed, metrics, frameworks); the model's inputs and outputs are read from model.onnx when it lists none"}, ""},
		}),
		Action: modelPublish,
	}
}

func modelPublish(c *cli.Context) error {
	args, err := positionalArgs(c)
	if err != nil {
		return cli.Exit(err, exitUsage)
	}
	if len(args) != 1 {
		return cli.Exit("spindle model publish: want one DIR holding model.onnx", exitUsage)
	}
	name := c.String("name")
	if name == "" {
		return cli.Exit("spindle model publish needs --name; see spindle model publish --help", exitUsage)
	}
	if err := store.CheckName(name); err != nil {
		return cli.Exit("--name: "+err.Error(), exitUsage)
	}
	var m store.Manifest
	if path := c.String("manifest"); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return cli.Exit("--manifest: "+err.Error(), exitUsage)
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return cli.Exit(fmt.Sprintf("--manifest %s: %v", path, err), exitUsage)
		}
	}
	env, err := newModelEnv(c)
	if err != nil {
		return err
	}
	defer env.res.Close()
	srcFS, dir, err := env.res.Resolve(c.Context, args[0])
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	if len(m.Inputs) == 0 || len(m.Outputs) == 0 {
		om, err := onnx.Load(c.Context, srcFS, dir+"/"+store.ModelFile)
		if err != nil {
			return modelExit(err)
		}
		m.Inputs, m.Outputs = onnx.Signature(om)
	}
	srcs, err := store.DirSource(c.Context, srcFS, dir)
	if err != nil {
		return modelExit(err)
	}
	s, err := store.OpenURI(c.Context, env.res, env.storeDir)
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	v, err := s.Publish(c.Context, name, srcs, m)
	if err != nil {
		return modelExit(err)
	}
	reportModel(v)
	fmt.Fprintf(c.App.Writer, "published %s -> %s\n", v.Ref(), v.URI)
	return nil
}

// reportModel tells the job this command runs in, if any, about the
// version it published (its web UI and event log list the job's models).
func reportModel(v *store.Version) {
	if err := task.ReportModel(v.Name, v.Number, v.URI); err != nil && !errors.Is(err, task.ErrNotSpindle) {
		fmt.Fprintf(os.Stderr, "spindle: warning: could not tell the job about %s: %v\n", v.Ref(), err)
	}
}
