// Command sparse-lr trains logistic regression on hashed categorical
// features with Spindle's parameter server: run it with
//
//	spindle submit --master 'local[2]' --num-ps 2 -- sparse-lr
//
// Every worker generates its own rows from a known sparse model
// (Criteo-like: Zipf-distributed values, so some keys are hot), pulls the
// weights of each batch's keys, pushes their gradients, and advances its
// clock; the servers apply them with FTRL-proximal (or AdaGrad, SGD,
// Adam). Worker 0 then scores held-out rows and prints the trained
// model's AUC and log loss beside the known model's own AUC.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/client"
	"github.com/spindle-ml/spindle/ps/pspb"
	"github.com/spindle-ml/spindle/task"
)

const table = "weights"

type options struct {
	data      dataset
	rows      int
	batch     int
	evalRows  int
	optimizer string
	lr, l1    float64
	dieAt     int
	pause     time.Duration
	export    string
	ckptEvery int
	scoresOut string
	initModel string
}

func main() {
	var o options
	flag.IntVar(&o.data.fields, "fields", 26, "categorical `fields` per row")
	flag.Uint64Var(&o.data.vocab, "vocab", 1<<valueBits, "values per field (at most 2^20)")
	flag.Float64Var(&o.data.zipf, "zipf", 1.2, "Zipf exponent of the values (> 1; larger: hotter keys)")
	flag.Uint64Var(&o.data.hot, "hot", 100, "values per field with a nonzero true weight")
	flag.Float64Var(&o.data.scale, "weight-scale", 0.4, "standard deviation of the true weights")
	flag.Float64Var(&o.data.bias, "bias", -1, "the true model's intercept")
	flag.Uint64Var(&o.data.seed, "seed", 7, "seed of the true model and the rows")
	flag.IntVar(&o.rows, "rows", 200_000, "training rows per worker")
	flag.IntVar(&o.batch, "batch", 1000, "rows per step")
	flag.IntVar(&o.evalRows, "eval-rows", 50_000, "held-out rows worker 0 scores")
	flag.StringVar(&o.optimizer, "optimizer", ps.FTRL, "the servers' optimizer: ftrl, adagrad, adam or sgd")
	flag.Float64Var(&o.lr, "lr", 0.1, "learning rate (FTRL's alpha)")
	flag.Float64Var(&o.l1, "l1", 1, "FTRL's L1 strength")
	flag.StringVar(&o.export, "export", "", "worker 0 writes the trained table to this Parquet `file` (a path or hdfs:// URI) at the end")
	flag.StringVar(&o.scoresOut, "scores-out", "", "worker 0 writes the first 100 held-out rows' ids (the bias key first) and its scores of them to this JSON `file`, to compare with an exported model's")
	flag.StringVar(&o.initModel, "init-model", "", "start the table from this ONNX model's (spindle model export of a sparse-lr checkpoint): a .onnx file, a directory holding model.onnx, or [STORE/]NAME[/VERSION]; needs --checkpoint-dir; a checkpoint to resume from wins")
	flag.DurationVar(&o.pause, "pause", 0, "sleep this long after each step: a job paced by time rather than rows (tests that act while it trains)")
	flag.IntVar(&o.dieAt, "die-at-step", 0, "worker 1 exits with status 3 at this step, in the job's first generation only (failure tests)")
	flag.IntVar(&o.ckptEvery, "checkpoint-every", 0, "worker 0 checkpoints the tables every `N` steps under the job's checkpoint directory (--checkpoint-dir), and a restarted job resumes from the latest")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := check(o); err != nil {
		fmt.Fprintln(os.Stderr, "sparse-lr:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, o, logger); err != nil {
		fmt.Fprintln(os.Stderr, "sparse-lr:", err)
		if errors.Is(err, errBadModel) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func check(o options) error {
	switch {
	case o.data.fields < 1 || o.data.fields > 1<<10:
		return fmt.Errorf("--fields %d: want 1 to 1024", o.data.fields)
	case o.data.vocab < 2 || o.data.vocab > 1<<valueBits:
		return fmt.Errorf("--vocab %d: want 2 to 2^20", o.data.vocab)
	case !(o.data.zipf > 1):
		return fmt.Errorf("--zipf %g: want more than 1", o.data.zipf)
	case o.pause < 0:
		return fmt.Errorf("--pause %s: want 0 or more", o.pause)
	case o.rows < 0 || o.rows == 0 && o.initModel == "" || o.batch < 1 || o.evalRows < 2:
		return errors.New("--rows, --batch and --eval-rows must be positive (eval at least 2; --rows 0 with --init-model only scores the model)")
	}
	return nil
}

func run(ctx context.Context, o options, logger *slog.Logger) error {
	env, err := task.FromEnv()
	if err != nil {
		return err
	}
	c, err := client.FromRanks(env.PSRanks(), logger)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	spec := &ps.TableSpec{Name: table, Dim: 1, Optimizer: &pspb.Optimizer{Kind: o.optimizer, LearningRate: float32(o.lr)}}
	if o.optimizer == ps.FTRL {
		spec.Optimizer.L1, spec.Optimizer.L2 = float32(o.l1), 1
	}
	declareCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err = c.Declare(declareCtx, spec)
	cancel()
	if err != nil {
		return err
	}
	// A restarted job (spindle.failure.policy restart) resumes from the
	// tables' latest checkpoint, at its step.
	var files *fsys.Resolver
	base := ""
	if env.CheckpointDir != "" {
		files = fsys.NewResolver(fsys.Options{})
		defer files.Close()
		base = strings.TrimRight(env.CheckpointDir, "/") + "/ps"
		if clock, ok, err := c.Restore(ctx, base, files); err != nil {
			return err
		} else if ok {
			fmt.Printf("sparse-lr: worker %d resumes at step %d from the tables' checkpoint\n", c.Worker(), clock)
		}
	}
	resumed := base != "" && c.Steps() > 0
	if o.initModel != "" && !resumed {
		if files == nil {
			files = fsys.NewResolver(fsys.Options{})
			defer files.Close()
		}
		if err := initFromModel(ctx, c, env, spec, o.initModel, files); err != nil {
			return err
		}
	}
	if o.ckptEvery > 0 && base == "" {
		return errors.New("--checkpoint-every needs the job's checkpoint directory (spindle submit --checkpoint-dir)")
	}
	start := time.Now()
	steps, keys, err := train(ctx, c, o, base, files)
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	logger.Info("trained", "worker", c.Worker(), "steps", steps, "seconds", fmt.Sprintf("%.2f", secs),
		"keys_per_second", fmt.Sprintf("%.0f", float64(keys)/secs))
	if c.Worker() != 0 {
		return nil
	}
	// Every worker's last step in, whatever the consistency model.
	if err := c.Barrier(ctx); err != nil {
		return err
	}
	return evaluate(ctx, c, o)
}

// train runs this worker's steps: pull the batch's weights, push their
// gradients, advance the clock. It returns the steps and keys moved.
func train(ctx context.Context, c *client.Client, o options, ckptBase string, files *fsys.Resolver) (int, int, error) {
	rows := o.data.stream(uint64(c.Worker()) + 1)
	// The rows of the steps done before a restart are drawn again and
	// dropped, so the stream goes on where it was.
	for range int(c.Steps()) * o.batch {
		rows.next()
	}
	var (
		index   = map[uint64]int{}
		keys    []uint64
		batchAt [][]int // each row's indexes into keys
		labels  []float32
		moved   int
		steps   int
	)
	generation := os.Getenv("SPINDLE_GENERATION")
	for done := int(c.Steps()) * o.batch; done < o.rows; {
		n := min(o.batch, o.rows-done)
		clear(index)
		keys, batchAt, labels = append(keys[:0], biasKey), batchAt[:0], labels[:0]
		index[biasKey] = 0
		for range n {
			rk, y, _ := rows.next()
			at := make([]int, 0, len(rk)+1)
			at = append(at, 0)
			for _, k := range rk {
				i, ok := index[k]
				if !ok {
					i = len(keys)
					index[k] = i
					keys = append(keys, k)
				}
				at = append(at, i)
			}
			batchAt = append(batchAt, at)
			labels = append(labels, y)
		}
		w := make([]float32, len(keys))
		if err := c.Pull(ctx, table, keys, w); err != nil {
			return steps, moved, err
		}
		grads := make([]float32, len(keys))
		for r, at := range batchAt {
			z := 0.0
			for _, i := range at {
				z += float64(w[i])
			}
			g := float32(sigmoid(z)) - labels[r]
			for _, i := range at {
				grads[i] += g
			}
		}
		if err := c.Push(ctx, table, keys, grads); err != nil {
			return steps, moved, err
		}
		if o.ckptEvery > 0 && c.Worker() == 0 && (c.Steps()+1)%int64(o.ckptEvery) == 0 {
			if _, err := c.ClockAndCheckpoint(ctx, ckptBase, files); err != nil {
				return steps, moved, err
			}
		} else if err := c.Clock(ctx); err != nil {
			return steps, moved, err
		}
		done += n
		steps++
		moved += 2 * len(keys)
		if o.dieAt > 0 && int(c.Steps()) == o.dieAt && c.Worker() == 1 && (generation == "" || generation == "0") {
			fmt.Fprintf(os.Stderr, "sparse-lr: worker 1 exits at step %d, as --die-at-step asks\n", steps)
			os.Exit(3)
		}
		task.Report(int64(steps), map[string]float64{"keys": float64(len(keys))})
		if o.pause > 0 {
			select {
			case <-ctx.Done():
				return steps, moved, ctx.Err()
			case <-time.After(o.pause):
			}
		}
	}
	return steps, moved, nil
}

// evaluate scores held-out rows with the trained weights and with the
// known model, and prints both.
func evaluate(ctx context.Context, c *client.Client, o options) error {
	rows := o.data.stream(0) // stream 0: rows no worker trained on
	trained := make([]float64, 0, o.evalRows)
	known := make([]float64, 0, o.evalRows)
	labels := make([]float32, 0, o.evalRows)
	const chunk = 5000
	var keys []uint64
	var sample scoreSample
	for len(labels) < o.evalRows {
		n := min(chunk, o.evalRows-len(labels))
		keys = append(keys[:0], biasKey)
		for range n {
			rk, y, logit := rows.next()
			keys = append(keys, rk...)
			labels = append(labels, y)
			known = append(known, sigmoid(logit))
		}
		w := make([]float32, len(keys))
		if err := c.Pull(ctx, table, keys, w); err != nil {
			return fmt.Errorf("pull the trained weights: %w", err)
		}
		for r := range n {
			z := float64(w[0])
			for _, v := range w[1+r*o.data.fields : 1+(r+1)*o.data.fields] {
				z += float64(v)
			}
			trained = append(trained, sigmoid(z))
			if len(sample.Scores) < sampleRows {
				ids := append([]uint64{biasKey}, keys[1+r*o.data.fields:1+(r+1)*o.data.fields]...)
				sample.IDs, sample.Scores = append(sample.IDs, ids), append(sample.Scores, sigmoid(z))
			}
		}
	}
	if o.scoresOut != "" {
		if err := sample.write(o.scoresOut); err != nil {
			return err
		}
	}
	stats, err := c.Stats(ctx)
	if err != nil {
		return err
	}
	var stored uint64
	var pushes uint64
	for _, s := range stats { // nil for a server out of the ring
		for _, t := range s.GetTables() {
			stored += t.OwnedKeys
			pushes += t.Pushes
		}
	}
	a, ka, ll := auc(trained, labels), auc(known, labels), logloss(trained, labels)
	fmt.Printf("sparse-lr: auc %.4f (known model %.4f), logloss %.4f, %d keys on %d servers, %d pushes applied, %s\n",
		a, ka, ll, stored, c.Servers(), pushes, os.Getenv("SPINDLE_PS_STALENESS"))
	task.Report(c.Steps(), map[string]float64{"auc": a, "known_auc": ka, "logloss": ll})
	if math.IsNaN(a) {
		return errors.New("the held-out rows have one label only: raise --eval-rows")
	}
	if o.export != "" {
		res := fsys.NewResolver(fsys.Options{})
		defer res.Close()
		n, err := c.ExportParquet(ctx, table, o.export, res)
		if err != nil {
			return err
		}
		fmt.Printf("sparse-lr: exported %d rows of table %s to %s\n", n, table, o.export)
	}
	return nil
}
