package feed

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet/compress"
)

// machineScaling is what a second thread gives work that lives in main
// memory rather than in a core's cache, on this machine, measured in
// the same run as the files it explains: the huge row group's columns
// are each one page of 16 MB, decompressed whole.
type machineScaling struct {
	copy   float64 // copying 17 buffers of 16 MB: 2 threads over 1
	snappy float64 // snappy-decoding 17 pages of 16 MB each (random float32s, as the benchmark files hold)
}

// Seventeen columns of 16 MB each, as the huge row group has (its
// float32 columns; its int64 label is twice that).
const (
	machineColumns   = 17
	machineColumnLen = 16 << 20
	machineRounds    = 9
)

// measureMachineScaling times copying and snappy-decoding the columns
// on 1 and 2 goroutines (GOMAXPROCS as many), alternating, and returns
// the medians' ratios.
func measureMachineScaling(b *testing.B) machineScaling {
	b.Helper()
	codec, err := compress.GetCodec(compress.Codecs.Snappy)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	src := make([][]byte, machineColumns)
	dst := make([][]byte, machineColumns)
	pages := make([][]byte, machineColumns)
	for i := range src {
		src[i] = make([]byte, machineColumnLen)
		for j := 0; j < machineColumnLen; j += 4 {
			binary.LittleEndian.PutUint32(src[i][j:], math.Float32bits(rng.Float32()))
		}
		dst[i] = make([]byte, machineColumnLen)
		pages[i] = codec.Encode(nil, src[i])
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	// spread runs do(i) for every column on threads goroutines, and
	// returns the time they took together.
	spread := func(threads int, do func(i int)) time.Duration {
		runtime.GOMAXPROCS(threads)
		next := make(chan int, machineColumns)
		for i := range machineColumns {
			next <- i
		}
		close(next)
		start := time.Now()
		var wg sync.WaitGroup
		for range threads {
			wg.Go(func() {
				for i := range next {
					do(i)
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	ratio := func(do func(i int)) float64 {
		var one, two []float64
		for range machineRounds {
			one = append(one, spread(1, do).Seconds())
			two = append(two, spread(2, do).Seconds())
		}
		return median(one) / median(two)
	}
	var s machineScaling
	s.copy = ratio(func(i int) { copy(dst[i], src[i]) })
	s.snappy = ratio(func(i int) {
		if out := codec.Decode(dst[i], pages[i]); len(out) != machineColumnLen {
			b.Errorf("snappy decoded column %d to %d bytes, want %d", i, len(out), machineColumnLen)
		}
	})
	return s
}
