package task_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/feed/wire"
	"github.com/spindle-ml/spindle/task"
)

// A Go training program under Spindle: read the environment, then train
// on one epoch after another until the feed has none left.
func Example() {
	stop := fakeExecutor() // what spindle's executor does before starting the program
	defer stop()

	ctx := context.Background()
	env, err := task.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	err = env.TensorEpochs(ctx, func(ep *wire.TensorEpoch) error {
		var rows int
		var sum float32
		for {
			b, err := ep.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			// b.Features holds b.Rows rows of ep.NumFeatures() values, row-major.
			rows += b.Rows
			for _, y := range b.Labels {
				sum += y
			}
		}
		fmt.Printf("rank %d/%d epoch %d: %d rows of %v, label sum %v\n",
			env.Rank, env.WorldSize, ep.Epoch(), rows, ep.FeatureNames(), sum)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// rank 0/1 epoch 0: 4 rows of [a b], label sum 2
	// rank 0/1 epoch 1: 4 rows of [a b], label sum 2
}

// fakeExecutor serves two epochs of a tiny table in tensor mode and sets
// the environment an executor sets. It returns a function that undoes both.
func fakeExecutor() func() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Float32},
		{Name: "b", Type: arrow.PrimitiveTypes.Int64},
		{Name: "label", Type: arrow.FixedWidthTypes.Boolean},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	b.Field(0).(*array.Float32Builder).AppendValues([]float32{0.5, 1.5, 2.5, 3.5}, nil)
	b.Field(1).(*array.Int64Builder).AppendValues([]int64{1, 2, 3, 4}, nil)
	b.Field(2).(*array.BooleanBuilder).AppendValues([]bool{true, false, true, false}, nil)
	rec := b.NewRecordBatch()
	b.Release()

	srv, err := wire.NewServer(wire.ServerConfig{
		SocketPath:  filepath.Join(dir, "feed.sock"),
		Mode:        wire.ModeTensor,
		Epochs:      2,
		Source:      oneBatch{rec},
		LabelColumn: "label",
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()

	vars := map[string]string{
		task.EnvRank: "0", task.EnvWorldSize: "1", task.EnvLocalRank: "0", task.EnvLocalWorldSize: "1",
		task.EnvJobID: "example", task.EnvFeedMode: "tensor", task.EnvFeed: filepath.Join(dir, "feed.sock"),
	}
	for k, v := range vars {
		os.Setenv(k, v)
	}
	return func() {
		for k := range vars {
			os.Unsetenv(k)
		}
		cancel()
		if err := <-done; err != nil {
			log.Fatal(err)
		}
		rec.Release()
		os.RemoveAll(dir)
	}
}

// oneBatch is an epoch source whose every epoch is one batch.
type oneBatch struct{ rec arrow.RecordBatch }

func (o oneBatch) Schema() *arrow.Schema { return o.rec.Schema() }

func (o oneBatch) Epoch(context.Context, int) (feed.Reader, error) {
	o.rec.Retain()
	return &oneBatchReader{rec: o.rec}, nil
}

type oneBatchReader struct{ rec arrow.RecordBatch }

func (r *oneBatchReader) Schema() *arrow.Schema { return r.rec.Schema() }

func (r *oneBatchReader) Next(context.Context) (arrow.RecordBatch, error) {
	if r.rec == nil {
		return nil, io.EOF
	}
	rec := r.rec
	r.rec = nil
	return rec, nil
}

func (r *oneBatchReader) Close() error {
	if r.rec != nil {
		r.rec.Release()
	}
	return nil
}
