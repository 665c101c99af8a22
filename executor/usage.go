package executor

import (
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// usageEvery is how often at most heartbeats read their training process
// group's CPU and memory; heartbeats in between repeat the last reading.
// A reading scans the stat file of every process on the host
// (groupUsage): with heartbeats every 200 ms on a host of several hundred
// processes, that scan was most of an idle executor's CPU, nearly all of
// it in the kernel. It is a little under the default heartbeat interval
// (1 s), so that at the default every heartbeat still reads afresh.
const usageEvery = 900 * time.Millisecond

// usageCache holds the last reading of a process group's usage. Its zero
// value reads /proc with the wall clock.
type usageCache struct {
	read func(pgid int) (*driverpb.Usage, error) // nil: groupUsage of /proc
	now  func() time.Time                        // nil: time.Now

	mu   sync.Mutex
	pgid int
	at   time.Time
	last *driverpb.Usage
}

// get returns a copy of pgid's usage, read afresh when the last reading
// is of another group or older than usageEvery, or nil when it cannot be
// read (the group has gone).
func (c *usageCache) get(pgid int) *driverpb.Usage {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if c.now != nil {
		now = c.now()
	}
	if c.last == nil || c.pgid != pgid || now.Sub(c.at) >= usageEvery {
		read := c.read
		if read == nil {
			read = func(pgid int) (*driverpb.Usage, error) { return groupUsage("/proc", pgid) }
		}
		u, err := read(pgid)
		if err != nil {
			c.last = nil
			return nil
		}
		c.pgid, c.at, c.last = pgid, now, u
	}
	return proto.Clone(c.last).(*driverpb.Usage)
}
