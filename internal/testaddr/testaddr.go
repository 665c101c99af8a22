package testaddr

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// lowestPort is the bottom of the range Free chooses from; below it sit
// well-known service ports a developer machine may use.
const lowestPort = 20000

// attempts bounds how many ports Free tries before giving up.
const attempts = 200

// Free returns a 127.0.0.1 address whose port nothing listens on and that
// no other caller of Free, in this process or another, is given while t
// runs. The caller binds it itself (a child process, a server restarted
// on the same address).
func Free(t testing.TB) string {
	t.Helper()
	hi := ephemeralLow()
	if hi-lowestPort < 1000 {
		// The ephemeral range covers nearly everything: fall back to a
		// port the kernel picks and accept the small race.
		return kernelPicked(t)
	}
	dir := filepath.Join(os.TempDir(), "spindle-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatalf("testaddr: %v", err)
	}
	for range attempts {
		port := lowestPort + rand.IntN(hi-lowestPort)
		unlock, ok := claim(filepath.Join(dir, strconv.Itoa(port)))
		if !ok {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			unlock()
			continue
		}
		_ = l.Close()
		t.Cleanup(unlock)
		return addr
	}
	t.Fatalf("testaddr: no free port below %d after %d tries", hi, attempts)
	return ""
}

// claim takes an exclusive, non-blocking flock on path. The lock dies with
// the process, so a crashed test run leaves nothing claimed.
func claim(path string) (unlock func(), ok bool) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, false
	}
	return func() { _ = f.Close() }, true
}

// ephemeralLow reads the bottom of the kernel's ephemeral port range,
// assuming Linux's default when it cannot.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}

func kernelPicked(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testaddr: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Refusing returns a 127.0.0.1 address that refuses every connection for
// as long as t runs: its port is bound by a socket that never listens, so
// nothing else can take it and connecting gets a reset.
func Refusing(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("testaddr: socket: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("testaddr: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("testaddr: getsockname: %v", err)
	}
	in, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		t.Fatalf("testaddr: bound to %T, want an IPv4 address", sa)
	}
	return fmt.Sprintf("127.0.0.1:%d", in.Port)
}
