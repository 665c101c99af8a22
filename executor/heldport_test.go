package executor

import (
	"errors"
	"net"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// plainBind binds host:port without SO_REUSEADDR, as a process that picks
// its own port does, and reports the error.
func plainBind(t *testing.T, host string, port int) error {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	return unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte(net.ParseIP(host).To4()), Port: port})
}

// The service port stays taken for everyone but the framework, which
// binds and listens on it itself (with SO_REUSEADDR, as Go's net.Listen,
// TensorFlow's gRPC server and PyTorch's TCPStore do), on the executor's
// host or on every address, while the executor still holds it.
func TestServicePortHeldButBindable(t *testing.T) {
	ports, err := reservePorts("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer ports.close()
	port := int(ports.ports()[1])
	// On the host's address or another: a listener there would keep a
	// framework that binds every address from binding.
	for _, other := range []string{"127.0.0.1", "127.0.0.2"} {
		if err := plainBind(t, other, port); !errors.Is(err, unix.EADDRINUSE) {
			t.Fatalf("another process binding the held service port %s:%d: %v, want EADDRINUSE", other, port, err)
		}
	}
	for _, addr := range []string{"127.0.0.1", "0.0.0.0", "::"} {
		l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("the training framework could not listen on the held service port %s:%d: %v", addr, port, err)
		}
		c, err := net.Dial("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("dial the framework's listener on %s:%d: %v", addr, port, err)
		}
		c.Close()
		l.Close()
	}
	if err := plainBind(t, "127.0.0.1", port); !errors.Is(err, unix.EADDRINUSE) {
		t.Fatalf("after the framework closed its listener, binding port %d: %v, want it still held", port, err)
	}
	ports.close()
	if err := plainBind(t, "127.0.0.1", port); err != nil {
		t.Fatalf("port %d still taken after the executor let it go: %v", port, err)
	}
}
