package driver

import (
	"context"
	"testing"
	"time"
)

type progressSink []float64

func (s *progressSink) ReportProgress(_ context.Context, done float64) error {
	*s = append(*s, done)
	return nil
}

// TestClusterProgress: the cluster manager hears the share of the rows
// taken at most every progressEvery, only when it moved by progressStep,
// and always the end.
func TestClusterProgress(t *testing.T) {
	var sink progressSink
	p := &clusterProgress{to: &sink, expect: 1000}
	t0 := time.Now()
	ranks := func(a, b int64) []rankProgress { return []rankProgress{{takenRows: a}, {takenRows: b}} }
	steps := []struct {
		after time.Duration
		a, b  int64
	}{
		{0, 0, 0},                               // nothing moved
		{progressEvery, 100, 150},               // 0.25
		{progressEvery + time.Second, 300, 300}, // too soon
		{2 * progressEvery, 130, 124},           // moved less than a step
		{3 * progressEvery, 400, 450},           // 0.85
		{4 * progressEvery, 500, 600},           // past the end: 1
		{5 * progressEvery, 500, 600},           // said already
	}
	for _, s := range steps {
		if err := p.update(context.Background(), t0.Add(s.after), ranks(s.a, s.b)); err != nil {
			t.Fatal(err)
		}
	}
	want := []float64{0.25, 0.85, 1}
	if len(sink) != len(want) {
		t.Fatalf("reported %v, want %v", sink, want)
	}
	for i := range want {
		if sink[i] != want[i] {
			t.Fatalf("reported %v, want %v", sink, want)
		}
	}

	none := newClusterProgress(nil, 1000)
	if err := none.update(context.Background(), t0, ranks(1, 1)); err != nil || none.to != nil {
		t.Fatalf("a cluster manager without progress: %v", err)
	}
}
