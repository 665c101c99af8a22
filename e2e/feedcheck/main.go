// Command feedcheck is a training process for end-to-end tests: it reads
// every epoch of its feed and prints what it saw, one line per epoch:
//
//	feedcheck rank=0 epoch=0 rows=1000 batches=4 sum=12.5 order=9f2c...
//
// sum adds the first feature column; order hashes the sequence of first
// feature values, so shuffling shows as a different hash. Flags make it
// fail, hang or record its pid, for the failure tests.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"hash"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/spindle-ml/spindle/feed/wire"
)

func main() {
	failRank := flag.Int("fail-rank", -1, "this rank exits with --fail-code after its first epoch")
	failCode := flag.Int("fail-code", 3, "exit status for --fail-rank")
	hang := flag.Bool("hang", false, "after reading, wait until killed")
	pidDir := flag.String("pid-dir", "", "write this process's pid to DIR/rank-N.pid")
	slow := flag.Duration("batch-delay", 0, "sleep this long per batch")
	removeInputs := flag.String("remove-inputs", "", "after the first batch, delete the files matching this glob "+
		"(the executor has them open by then; later epochs must come from its cache)")
	flag.Parse()
	if *removeInputs != "" {
		firstBatchHook = func() {
			paths, err := filepath.Glob(*removeInputs)
			if err != nil || len(paths) == 0 {
				fatal(fmt.Errorf("-remove-inputs %q matches nothing (%v)", *removeInputs, err))
			}
			for _, p := range paths {
				if err := os.Remove(p); err != nil {
					fatal(err)
				}
			}
			fmt.Printf("feedcheck removed %d input files\n", len(paths))
		}
	}

	rank, _ := strconv.Atoi(os.Getenv("SPINDLE_RANK"))
	if *pidDir != "" {
		p := fmt.Sprintf("%s/rank-%d.pid", *pidDir, rank)
		if err := os.WriteFile(p, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			fatal(err)
		}
	}
	fmt.Printf("feedcheck rank=%d world=%s peers=%s master=%s:%s\n", rank,
		os.Getenv("SPINDLE_WORLD_SIZE"), os.Getenv("SPINDLE_PEERS"), os.Getenv("MASTER_ADDR"), os.Getenv("MASTER_PORT"))
	if os.Getenv("SPINDLE_JOB_SECRET") != "" {
		fatal(errors.New("the job secret leaked into the training environment"))
	}
	ctx := context.Background()
	mode, sock := os.Getenv("SPINDLE_FEED_MODE"), os.Getenv("SPINDLE_FEED")
	if mode == "arrow" || mode == "tensor" {
		_, err := os.Stat(wire.SharedMemoryPath(sock))
		fmt.Printf("feedcheck rank=%d shared-memory=%t\n", rank, err == nil)
	}
	for epoch := 0; ; epoch++ {
		var rows, batches int64
		var sum float64
		order := sha256.New()
		var err error
		began := time.Now()
		switch mode {
		case "arrow":
			rows, batches, sum, err = arrowEpoch(ctx, sock, order, *slow)
		case "tensor":
			rows, batches, sum, err = tensorEpoch(ctx, sock, order, *slow)
		case "direct":
			spec, err := wire.ReadDirectSpec(sock)
			if err != nil {
				fatal(err)
			}
			for _, s := range spec.Splits {
				rows += s.Rows
			}
			fmt.Printf("feedcheck rank=%d direct splits=%d rows=%d epochs=%d\n", rank, len(spec.Splits), rows, spec.Epochs)
			return
		default:
			fatal(fmt.Errorf("unknown SPINDLE_FEED_MODE %q", mode))
		}
		if err != nil {
			fatal(err)
		}
		if batches == 0 {
			break
		}
		fmt.Printf("feedcheck rank=%d epoch=%d rows=%d batches=%d sum=%.6f order=%s seconds=%.6f\n",
			rank, epoch, rows, batches, sum, hex.EncodeToString(order.Sum(nil))[:16], time.Since(began).Seconds())
		if rank == *failRank {
			fmt.Fprintf(os.Stderr, "feedcheck: rank %d failing on purpose\n", rank)
			os.Exit(*failCode)
		}
	}
	if *hang {
		fmt.Println("feedcheck hanging")
		select {}
	}
}

// firstBatchHook, when set, runs once after the first batch is read.
var firstBatchHook func()

func firstBatch() {
	if firstBatchHook != nil {
		hook := firstBatchHook
		firstBatchHook = nil
		hook()
	}
}

func arrowEpoch(ctx context.Context, sock string, order hash.Hash, delay time.Duration) (rows, batches int64, sum float64, err error) {
	ep, err := wire.DialArrow(ctx, sock)
	if err != nil {
		return 0, 0, 0, err
	}
	defer ep.Close()
	for {
		rec, err := ep.Next(ctx)
		if errors.Is(err, io.EOF) {
			return rows, batches, sum, nil
		}
		if err != nil {
			return 0, 0, 0, err
		}
		batches++
		firstBatch()
		rows += rec.NumRows()
		for i := 0; i < int(rec.NumRows()); i++ {
			v := value(rec.Column(0), i)
			sum += v
			hashValue(order, v)
		}
		rec.Release()
		time.Sleep(delay)
	}
}

func tensorEpoch(ctx context.Context, sock string, order hash.Hash, delay time.Duration) (rows, batches int64, sum float64, err error) {
	ep, err := wire.DialTensor(ctx, sock)
	if err != nil {
		return 0, 0, 0, err
	}
	defer ep.Close()
	f := ep.NumFeatures()
	for {
		b, err := ep.Next(ctx)
		if errors.Is(err, io.EOF) {
			return rows, batches, sum, nil
		}
		if err != nil {
			return 0, 0, 0, err
		}
		batches++
		firstBatch()
		rows += int64(b.Rows)
		for i := 0; i < b.Rows; i++ {
			v := float64(b.Features[i*f])
			sum += v
			hashValue(order, v)
		}
		time.Sleep(delay)
	}
}

func value(a arrow.Array, i int) float64 {
	switch c := a.(type) {
	case *array.Float32:
		return float64(c.Value(i))
	case *array.Float64:
		return c.Value(i)
	case *array.Int64:
		return float64(c.Value(i))
	case *array.Int32:
		return float64(c.Value(i))
	}
	return math.NaN()
}

func hashValue(h hash.Hash, v float64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], math.Float64bits(float64(float32(v))))
	h.Write(b[:])
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "feedcheck: %v\n", err)
	os.Exit(1)
}
