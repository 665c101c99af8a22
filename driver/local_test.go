package driver

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestLocalRoomIsItsFreeSlots: local[2] has room for two executors, one
// while one runs, and two again once it ended.
func TestLocalRoomIsItsFreeSlots(t *testing.T) {
	l, err := NewLocal(LocalConfig{Binary: "sleep", Slots: 2, StopGrace: time.Second,
		Console: NewConsole(io.Discard, io.Discard, false), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	room := func() int {
		n, err := l.Room(ctx, ExecutorSpec{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := room(); n != 2 {
		t.Fatalf("room %d with nothing running, want 2", n)
	}
	if err := l.Request(ctx, []ExecutorSpec{{ID: "e0", Args: []string{"60"}}}); err != nil {
		t.Fatal(err)
	}
	if n := room(); n != 1 {
		t.Fatalf("room %d with one executor running, want 1", n)
	}
	if err := l.Release(ctx, []string{"e0"}); err != nil {
		t.Fatal(err)
	}
	for room() != 2 {
		if ctx.Err() != nil {
			t.Fatal("the released executor's slot never freed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
