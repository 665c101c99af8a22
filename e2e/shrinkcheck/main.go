// Command shrinkcheck is a training process for the elastic tests and the
// chaos harness: a Go trainer without input that allreduces every step
// with Spindle's collectives and, when a rank is lost and the job goes on
// without it in place (spindle.failure.shrinkInPlace), re-forms the
// smaller world with task.Env.Rejoin and task.CatchUp, keeping its
// process. Each step it allreduces a one from every rank and checks that
// the sum is the world size, so a rank that kept the old world fails.
// It prints "shrinkcheck joined pid=123 rank=2 world=4" once its
// communicator formed, "shrinkcheck at pid=123 rank=2 world=4 step=100"
// every 100 steps and, when it goes on in a smaller world,
//
//	shrinkcheck went on pid=123 rank=2 world=3 was=3/4 step=41 at_ms=1764412345678
//
// (at_ms: when its first step in that world completed, Unix milliseconds).
// With --grow it calls task.Env.Grow at every step boundary, so that the
// job grows back in place (spindle.failure.growInPlace): each rank that
// formed the bigger world prints
//
//	shrinkcheck grew pid=123 rank=2 world=4 was=2/3 step=97 at_ms=1764412345678
//
// and a newcomer, which takes the others' step with task.CatchUp,
//
//	shrinkcheck newcomer pid=124 rank=3 world=4 step=97
//
// and at the end
//
//	shrinkcheck final pid=123 rank=2 world=3 steps=200
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spindle-ml/spindle/collective"
	"github.com/spindle-ml/spindle/task"
)

func main() {
	steps := flag.Int64("steps", 200, "steps to train")
	pause := flag.Duration("pause", 20*time.Millisecond, "the work of one step, between allreduces")
	grow := flag.Bool("grow", false, "grow in place at step boundaries (task.Env.Grow)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *steps, *pause, *grow); err != nil {
		fmt.Fprintf(os.Stderr, "shrinkcheck: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, steps int64, pause time.Duration, grow bool) error {
	env, err := task.FromEnv()
	if err != nil {
		return err
	}
	comm, err := env.Comm(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if comm != nil {
			comm.Close()
		}
	}()
	fmt.Printf("shrinkcheck joined pid=%d rank=%d world=%d\n", os.Getpid(), comm.Rank(), comm.WorldSize())
	state := []float64{0} // the steps' sums so far: the same on every rank
	var step int64
	// A newcomer joins at the others' step boundary: its CatchUp answers
	// theirs, so its first step does not call Grow.
	newcomer := grow && env.Replacement > 0
	if newcomer {
		// The others hand it their step and state.
		if step, err = task.CatchUp(ctx, comm, -1, state); err != nil {
			return fmt.Errorf("newcomer: %w", err)
		}
		fmt.Printf("shrinkcheck newcomer pid=%d rank=%d world=%d step=%d\n", os.Getpid(), comm.Rank(), comm.WorldSize(), step)
	}
	announce := ""
	was := ""
	for step < steps {
		time.Sleep(pause) // the step's work: not synchronisation
		err := error(nil)
		if grow && !newcomer {
			err = growAt(ctx, env, &comm, &step, state, &was, &announce)
		}
		newcomer = false
		one := []float64{1}
		if err == nil {
			err = collective.AllReduce(ctx, comm, one, collective.Sum)
		}
		if err != nil {
			was = fmt.Sprintf("%d/%d", comm.Rank(), comm.WorldSize())
			if comm, err = env.Rejoin(ctx, comm, err); err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
			if step, err = task.CatchUp(ctx, comm, step, state); err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
			announce = "went on"
			continue
		}
		if int(one[0]) != comm.WorldSize() {
			return fmt.Errorf("step %d: the ranks' ones sum to %v in a world of %d", step, one[0], comm.WorldSize())
		}
		state[0] += one[0]
		step++
		if step%100 == 0 {
			fmt.Printf("shrinkcheck at pid=%d rank=%d world=%d step=%d\n", os.Getpid(), comm.Rank(), comm.WorldSize(), step)
		}
		if announce != "" {
			fmt.Printf("shrinkcheck %s pid=%d rank=%d world=%d was=%s step=%d at_ms=%d\n",
				announce, os.Getpid(), comm.Rank(), comm.WorldSize(), was, step, time.Now().UnixMilli())
			announce = ""
		}
	}
	fmt.Printf("shrinkcheck final pid=%d rank=%d world=%d steps=%d\n", os.Getpid(), comm.Rank(), comm.WorldSize(), step)
	return nil
}

// growAt forms the bigger world at this step boundary when the job grew
// (task.Env.Grow), and hands the newcomers this rank's step and state.
func growAt(ctx context.Context, env task.Env, comm **collective.Comm, step *int64, state []float64, was, announce *string) error {
	before := fmt.Sprintf("%d/%d", (*comm).Rank(), (*comm).WorldSize())
	c, grew, err := env.Grow(ctx, *comm)
	if err != nil || !grew {
		return err
	}
	*comm = c
	if *step, err = task.CatchUp(ctx, c, *step, state); err != nil {
		return fmt.Errorf("step %d: hand the newcomers the state: %w", *step, err)
	}
	*was, *announce = before, "grew"
	return nil
}
