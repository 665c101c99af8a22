package server

import (
	"os"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePageBytes is the size of a transparent huge page on amd64 and arm64
// with 4 KiB base pages.
const hugePageBytes = 2 << 20

// hugePagesAdvisable says whether this kernel gives transparent huge
// pages to memory that asks for them.
var hugePagesAdvisable = sync.OnceValue(func() bool {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	return err == nil && thpAdvisable(string(b))
})

// thpAdvisable reads the kernel's transparent_hugepage/enabled setting
// ("always [madvise] never", the chosen one in brackets): huge pages are
// given on request under "always" and "madvise", never under "never".
func thpAdvisable(setting string) bool {
	return strings.Contains(setting, "[always]") || strings.Contains(setting, "[madvise]")
}

// adviseHuge asks the kernel to back the huge pages that s's backing
// array lies in with transparent huge pages, and to collapse those
// already touched (a grown slab's copied half) at once. A table far
// larger than the caches is read at random: in 4 KiB pages nearly every
// row and index slot is a miss in the TLB as well. The memory is the Go
// heap's, which the runtime maps in chunks of whole huge pages; it keeps
// owning it, and the advice changes only how the kernel backs it (as the
// kernel's "always" setting does for the whole heap). Where the kernel
// gives no huge pages, nothing changes.
func adviseHuge[T any](s []T) {
	var zero T
	n := uintptr(cap(s)) * unsafe.Sizeof(zero)
	if n < hugeAdviseBytes || !hugePagesAdvisable() {
		return
	}
	// Addresses, not pointers: the range reaches past s, where the
	// collector must not see a pointer.
	p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	beg := p &^ (hugePageBytes - 1)
	end := (p + n + hugePageBytes - 1) &^ (hugePageBytes - 1)
	if madvise(beg, end-beg, unix.MADV_HUGEPAGE) == nil {
		madvise(beg, end-beg, unix.MADV_COLLAPSE)
	}
	runtime.KeepAlive(s)
}

func madvise(addr, n uintptr, advice int) error {
	if _, _, e := unix.Syscall(unix.SYS_MADVISE, addr, n, uintptr(advice)); e != 0 {
		return e
	}
	return nil
}

// hugeAdviseBytes is the smallest slab worth advising.
const hugeAdviseBytes = 64 << 10
