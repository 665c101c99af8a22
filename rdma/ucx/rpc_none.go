//go:build !cgo || !linux

package ucx

import (
	"context"
	"log/slog"
)

// Listener is never built here: Listen fails.
type Listener struct{}

// Listen fails: UCX is reached through cgo, on Linux.
func Listen(*slog.Logger, func(*Request)) (*Listener, error) { return nil, load() }

// Address implements the cgo build's method.
func (*Listener) Address() []byte { return nil }

// Refused implements the cgo build's method.
func (*Listener) Refused() uint64 { return 0 }

// Served implements the cgo build's method.
func (*Listener) Served() uint64 { return 0 }

// Accept implements the cgo build's method.
func (*Listener) Accept([]byte) (*Session, error) { return nil, load() }

// Close implements the cgo build's method.
func (*Listener) Close() error { return nil }

// Session is never built here.
type Session struct{}

// Grant implements the cgo build's method.
func (*Session) Grant() Grant { return Grant{} }

// Context implements the cgo build's method.
func (*Session) Context() context.Context { return context.Background() }

// Close implements the cgo build's method.
func (*Session) Close() {}

// Request is never built here.
type Request struct {
	Session    *Session
	Head, Body []byte
}

// Buffer implements the cgo build's method.
func (*Request) Buffer(n int) []byte { return make([]byte, n) }

// Reply implements the cgo build's method.
func (*Request) Reply([]byte, []byte) error { return load() }

// Dialer is never built here: NewDialer fails.
type Dialer struct{}

// NewDialer fails: UCX is reached through cgo, on Linux.
func NewDialer() (*Dialer, error) { return nil, load() }

// Address implements the cgo build's method.
func (*Dialer) Address() []byte { return nil }

// Connect implements the cgo build's method.
func (*Dialer) Connect([]byte, Grant) (*Conn, error) { return nil, load() }

// Close implements the cgo build's method.
func (*Dialer) Close() error { return nil }

// Conn is never built here.
type Conn struct{}

// Lose implements the cgo build's method.
func (*Conn) Lose(error) {}

// Close implements the cgo build's method.
func (*Conn) Close() {}

// Call implements the cgo build's method.
func (*Conn) Call(context.Context, []byte, [][]byte, []byte) (Reply, error) { return Reply{}, load() }

// Reply is the answer to a call.
type Reply struct {
	Head, Payload []byte
	InPlace       bool
}

// Release implements the cgo build's method.
func (Reply) Release() {}
