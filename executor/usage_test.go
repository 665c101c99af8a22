package executor

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// TestUsageReadAtMostEveryInterval: heartbeats closer together than
// usageEvery repeat the last reading instead of scanning every process
// on the host again; a reading that old, or of another group, is read
// afresh, and a group that has gone gives no usage.
func TestUsageReadAtMostEveryInterval(t *testing.T) {
	now := time.Unix(1000, 0)
	reads := 0
	var gone bool
	c := &usageCache{
		now: func() time.Time { return now },
		read: func(pgid int) (*driverpb.Usage, error) {
			if gone {
				return nil, errors.New("no process in the group")
			}
			reads++
			return &driverpb.Usage{CpuSeconds: float64(reads), MemoryBytes: int64(pgid)}, nil
		},
	}
	// Five heartbeats 200 ms apart, as the tests' jobs send them.
	for i := range 5 {
		u := c.get(7)
		if u.GetCpuSeconds() != 1 || u.GetMemoryBytes() != 7 {
			t.Fatalf("heartbeat %d: usage %v, want the first reading", i, u)
		}
		u.Gpus = 3 // what the GPU sampler adds stays out of the reading kept
		if i < 4 {
			now = now.Add(200 * time.Millisecond)
		}
	}
	if reads != 1 {
		t.Fatalf("%d readings in %v of heartbeats, want 1", reads, 800*time.Millisecond)
	}
	if u := c.get(7); u.GetGpus() != 0 {
		t.Errorf("the kept reading was changed through a copy: %v", u)
	}
	now = now.Add(usageEvery)
	if u := c.get(7); u.GetCpuSeconds() != 2 || reads != 2 {
		t.Errorf("after %v: usage %v after %d readings, want a second reading", usageEvery, u, reads)
	}
	if u := c.get(8); u.GetMemoryBytes() != 8 || reads != 3 {
		t.Errorf("another group: usage %v after %d readings, want it read", u, reads)
	}
	gone = true
	now = now.Add(usageEvery)
	if u := c.get(8); u != nil {
		t.Errorf("a group that has gone: usage %v, want none", u)
	}
}

// TestUsageCacheReadsProc: the zero value reads this process's group.
func TestUsageCacheReadsProc(t *testing.T) {
	var c usageCache
	if u := c.get(syscall.Getpgrp()); u == nil || u.GetMemoryBytes() <= 0 {
		t.Fatalf("usage of this process's group: %v", u)
	}
}
