//go:build linux

package collective

import (
	"math"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Futex operations on a word that other processes map too: without
// FUTEX_PRIVATE_FLAG, the kernel keys the wait by the file's page.
const (
	futexOpWait = 0
	futexOpWake = 1
)

// futexWait sleeps while *addr holds val, for at most d; a wake, a
// signal or a changed value ends it early.
func futexWait(addr *uint32, val uint32, d time.Duration) {
	if atomic.LoadUint32(addr) != val {
		return
	}
	ts := unix.NsecToTimespec(d.Nanoseconds())
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexOpWait, uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWake wakes every sleeper on addr, in any process.
func futexWake(addr *uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexOpWake, math.MaxInt32, 0, 0, 0)
}
