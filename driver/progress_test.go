package driver

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestProgressRatesAndLines(t *testing.T) {
	var out, errb bytes.Buffer
	c := NewConsole(&out, &errb, false)
	p := newProgress(c, 2*time.Second, 3)
	t0 := p.start
	p.update(t0.Add(1*time.Second), []rankProgress{{rank: 0, batches: 10, rows: 100}, {rank: 1, batches: 0}})
	if errb.Len() != 0 {
		t.Fatalf("a plain line before the interval: %q", errb.String())
	}
	p.update(t0.Add(2*time.Second), []rankProgress{{rank: 0, batches: 30, rows: 300, epoch: 1}, {rank: 1, batches: 20, rows: 200, epoch: 1}})
	line := errb.String()
	for _, want := range []string{"epoch 2/3", "500 rows", "rank 0: 20 batches/s", "rank 1: 20 batches/s"} {
		if !strings.Contains(line, want) {
			t.Errorf("progress line %q lacks %q", line, want)
		}
	}
	// Between heartbeats the rate holds instead of dropping to zero.
	p.update(t0.Add(4500*time.Millisecond), []rankProgress{{rank: 0, batches: 30, rows: 300, epoch: 1, exited: true}, {rank: 1, batches: 20, rows: 200, epoch: 1}})
	if !strings.Contains(errb.String(), "rank 0: done") || strings.Contains(errb.String(), "rank 1: 0 batches/s") {
		t.Errorf("lines = %q", errb.String())
	}
}

func TestConsoleKeepsLiveLineBelowOutput(t *testing.T) {
	var out bytes.Buffer
	c := NewConsole(&out, &out, true)
	c.Live("progress: 1")
	c.Println("[rank 0] hello")
	c.EndLive()
	got := out.String()
	want := "\r\033[Kprogress: 1" + "\r\033[K" + "[rank 0] hello\n" + "progress: 1" + "\n"
	if got != want {
		t.Fatalf("console wrote %q, want %q", got, want)
	}
}
