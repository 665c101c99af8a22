package jobview

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkProgress is the cost of one rank's progress event as jobs grow:
// the driver records one per rank every tick, so it must not grow with the
// ranks (make scale's driver CPU per heartbeat).
func BenchmarkProgress(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("ranks=%d", n), func(b *testing.B) {
			t0 := time.Now()
			j := NewJob()
			j.Apply(Event{Time: t0, Kind: KindSubmitted, Info: &Info{ID: "j", WorldSize: n}})
			for r := 0; r < n; r++ {
				j.Apply(Event{Time: t0, Kind: KindProgress, Rank: r, Progress: &Progress{Rows: 1}})
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				at := t0.Add(time.Duration(i) * time.Millisecond)
				j.Apply(Event{Time: at, Kind: KindProgress, Rank: i % n, Progress: &Progress{Rows: int64(i)}})
			}
		})
	}
}
