//go:build !linux

package collective

import (
	"sync/atomic"
	"time"
)

// futexWait polls: without Linux no segment is ever mapped (mapShared
// fails), so this only keeps the package whole.
func futexWait(addr *uint32, val uint32, d time.Duration) {
	if atomic.LoadUint32(addr) == val {
		time.Sleep(min(d, time.Millisecond))
	}
}

func futexWake(*uint32) {}
