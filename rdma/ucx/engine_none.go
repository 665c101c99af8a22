//go:build !cgo || !linux

package ucx

import (
	"context"
	"fmt"
	"net"
	"time"
)

// load fails: UCX is reached through cgo, on Linux.
func load() error {
	return fmt.Errorf("%w: built without cgo (CGO_ENABLED=0) or not for Linux", ErrUnavailable)
}

func version() string { return "" }

// engine is never built here: newEngine fails.
type engine struct{}

func newEngine(int, time.Duration) (*engine, error)           { return nil, load() }
func (*engine) address() []byte                               { return nil }
func (*engine) connect(int, []byte, bool, *net.TCPConn) error { return load() }
func (*engine) Send(context.Context, int, []byte) error       { return load() }
func (*engine) Recv(context.Context, int, []byte) error       { return load() }
func (*engine) RecvInPlace(context.Context, int, int, int, []byte, func([]byte)) (bool, error) {
	return false, load()
}
func (*engine) Interrupt()           {}
func (*engine) Close() error         { return nil }
func (*engine) transports() []string { return nil }
func (*engine) resources() []string  { return nil }
