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
	"io"
	"math"
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
	var last epochStats
	epochs := 0
	for ; ; epochs++ {
		ep, err := env.Tensors(ctx)
		if err != nil {
			return fmt.Errorf("open epoch %d: %w", epochs, err)
		}
		if _, ok := ep.LabelName(); !ok {
			ep.Close()
			return errors.New("the feed has no label column; submit with --label-column")
		}
		if m == nil && initRef != "" {
			if m, err = initModel(ctx, initRef, ep.NumFeatures()); err != nil {
				ep.Close()
				return err
			}
			fmt.Printf("initialized rank=%d from model %s weights=%s\n", env.Rank, initRef, m.fingerprint())
		}
		if m == nil {
			m = newModel(ep.NumFeatures())
		}
		if len(m.w) != ep.NumFeatures() {
			ep.Close()
			return fmt.Errorf("the checkpoint has %d weights but the feed has %d features", len(m.w), ep.NumFeatures())
		}
		stats, err := trainEpoch(ctx, ep, m, sync, lr, l2)
		ep.Close()
		if err != nil {
			return fmt.Errorf("epoch %d: %w", epochs, err)
		}
		if stats.rows == 0 {
			break // past the last epoch
		}
		last = stats
		fmt.Printf("epoch %d: rows=%d loss=%.4f accuracy=%.4f\n", epochs, stats.rows, stats.loss(), stats.accuracy())
	}
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

// epochStats accumulates loss and accuracy over an epoch, measured on
// each batch before the step that learns from it.
type epochStats struct {
	rows    int64
	lossSum float64
	correct int64
}

func (s epochStats) loss() float64     { return s.lossSum / math.Max(1, float64(s.rows)) }
func (s epochStats) accuracy() float64 { return float64(s.correct) / math.Max(1, float64(s.rows)) }

func trainEpoch(ctx context.Context, ep *wire.TensorEpoch, m *model, sync gradientSync, lr, l2 float64) (epochStats, error) {
	var st epochStats
	grad := make([]float64, len(m.w)+1)
	for {
		b, err := ep.Next(ctx)
		if errors.Is(err, io.EOF) {
			return st, nil
		}
		if err != nil {
			return st, err
		}
		loss, correct := m.gradient(b, grad)
		st.rows += int64(b.Rows)
		st.lossSum += loss
		st.correct += int64(correct)
		if err := sync.average(ctx, grad); err != nil {
			return st, fmt.Errorf("average gradients: %w", err)
		}
		m.step(grad, lr, l2)
	}
}
