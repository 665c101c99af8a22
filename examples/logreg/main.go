// Command logreg is Spindle's example Go trainer: logistic regression with
// minibatch SGD, fed by Spindle's tensor feed.
//
// Run it under spindle submit with --feed tensor and a label column. Each
// rank reads its share of every epoch; when the job has more than one rank,
// gradients are averaged across ranks every step with Spindle's collectives
// (ring allreduce, peer to peer), so every rank ends with bit-identical
// weights. At the end each rank prints one line:
//
//	final rank=0 epochs=3 loss=0.3012 accuracy=0.8731 weights=5f1c0e2a9b3d
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spindle-ml/spindle/feed/wire"
	"github.com/spindle-ml/spindle/task"
	"github.com/spindle-ml/spindle/timeline"
)

func main() {
	lr := flag.Float64("lr", 0.5, "learning rate")
	l2 := flag.Float64("l2", 1e-4, "L2 regularisation")
	initRef := flag.String("init-model", "", "start from this ONNX model's weights: a .onnx file, a directory holding model.onnx, or [STORE/]NAME[/VERSION] in the model store (spindle.models.dir); a checkpoint to resume from wins")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *lr, *l2, *initRef); err != nil {
		fmt.Fprintf(os.Stderr, "logreg: %v\n", err)
		if errors.Is(err, errBadModel) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, lr, l2 float64, initRef string) error {
	env, err := task.FromEnv()
	if err != nil {
		return err
	}
	// The last spans of the job's timeline (spindle.timeline), if any.
	defer timeline.Flush()
	if env.FeedMode != wire.ModeTensor {
		return fmt.Errorf("logreg reads the tensor feed; submit with --feed tensor (got %q)", env.FeedMode)
	}
	sync, err := newGradientSync(ctx, env)
	if err != nil {
		return err
	}
	defer sync.Close()

	m, err := loadCheckpoint(ctx, env)
	if err != nil {
		return err
	}
	t := &trainer{env: env, m: m, sync: sync, lr: lr, l2: l2}
	var last epochStats
	epochs := 0
	for ; ; epochs++ {
		epoch := env.FeedStartEpoch + epochs
		ep, err := env.Tensors(ctx)
		if err != nil {
			return fmt.Errorf("open epoch %d: %w", epoch, err)
		}
		if err := t.prepare(ctx, ep, initRef, epochs == 0); err != nil {
			ep.Close()
			return err
		}
		stats, err := t.trainEpoch(ctx, ep, epoch)
		ep.Close()
		if err != nil {
			return fmt.Errorf("epoch %d: %w", epoch, err)
		}
		if stats.batches == 0 {
			break // past the last epoch
		}
		last = stats
		fmt.Printf("epoch %d: rows=%d loss=%.4f accuracy=%.4f\n", epoch, stats.rows, stats.loss(), stats.accuracy())
	}
	m = t.m
	if m == nil {
		return errors.New("the feed had no data")
	}
	if err := saveCheckpoint(ctx, env, m, epochs); err != nil {
		return err
	}
	fmt.Printf("final rank=%d epochs=%d loss=%.4f accuracy=%.4f weights=%s\n",
		env.Rank, epochs, last.loss(), last.accuracy(), m.fingerprint())
	return nil
}
