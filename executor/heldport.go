package executor

import (
	"fmt"
	"net"
	"sync"

	"golang.org/x/sys/unix"
)

// heldPort is a TCP port bound with SO_REUSEADDR and never listened on,
// for the life of the training process that serves on it. Linux gives no
// automatic choice (a listener on port 0, an outgoing connection's
// source port) a port that a socket is bound to, while a framework that
// binds it with SO_REUSEADDR itself, as TensorFlow's gRPC server and
// PyTorch's TCPStore do, may share it with a socket that is not
// listening. A port freed just before the process started was not safe:
// a loaded machine took 25 s to bring TensorFlow to its bind, and by
// then another process had the port.
//
// The port is held on every address of the host's family, not the host's
// alone: Linux's automatic choice skips a port only where the holder's
// address overlaps the one being bound, so a port held on 127.0.0.1 was
// still given to listeners on other addresses (of 3,000 on 127.0.0.2,
// 1,261 got held ports; none with the holder on 0.0.0.0), and one such
// listener keeps a framework that binds every address (TensorFlow's gRPC
// server binds 0.0.0.0) from binding at all.
type heldPort struct {
	once sync.Once
	fd   int
	port int
}

// holdPort binds a free port on every address of host's family (host is
// an IP address) and holds it.
func holdPort(host string) (*heldPort, error) {
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, fmt.Errorf("reserve a port on %s: not an IP address", host)
	}
	family, sa := unix.AF_INET6, unix.Sockaddr(&unix.SockaddrInet6{})
	if ip.To4() != nil {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("reserve a port on %s: socket: %w", host, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("reserve a port on %s: SO_REUSEADDR: %w", host, err)
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("reserve a port on %s: bind: %w", host, err)
	}
	bound, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("reserve a port on %s: getsockname: %w", host, err)
	}
	h := &heldPort{fd: fd}
	switch a := bound.(type) {
	case *unix.SockaddrInet4:
		h.port = a.Port
	case *unix.SockaddrInet6:
		h.port = a.Port
	}
	return h, nil
}

// close frees the port; later calls do nothing.
func (h *heldPort) close() {
	h.once.Do(func() { unix.Close(h.fd) })
}
