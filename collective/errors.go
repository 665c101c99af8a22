package collective

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error an operation returns wraps one of them, so
// callers can tell a lost peer from a stalled one or from a programming
// error with errors.Is.
var (
	// ErrClosed is returned by operations on a communicator after Close.
	ErrClosed = errors.New("collective: communicator closed")

	// ErrPeerLost means the connection to a peer broke: the peer process
	// died, closed its communicator, or the network reset the connection.
	ErrPeerLost = errors.New("collective: connection to peer lost")

	// ErrPeerTimeout means a peer made no progress for the configured
	// timeout: it is stalled, or it entered the operation much later than
	// this rank.
	ErrPeerTimeout = errors.New("collective: peer made no progress within the timeout")

	// ErrAborted means a rank gave up on the communicator on purpose: its
	// context was cancelled mid-operation, it was closed mid-operation,
	// or it detected a mismatch.
	ErrAborted = errors.New("collective: communicator aborted")

	// ErrMismatch means two ranks called different operations, or the same
	// operation with different arguments (length, element type, root),
	// at the same point of their sequence of collective calls.
	ErrMismatch = errors.New("collective: ranks called mismatched operations")

	// ErrHandshake means a peer answered the connection handshake with a
	// different job id, world size, rank or protocol version, or that the
	// peer tokens of the two sides do not match (see Config.Token).
	ErrHandshake = errors.New("collective: handshake rejected")

	// ErrReplaced means the other side of a handshake knows of a newer
	// incarnation of this rank: this process was replaced (see
	// Config.Incarnations) and must not rejoin. It wraps ErrHandshake too.
	ErrReplaced = fmt.Errorf("%w: this incarnation of the rank was replaced", ErrHandshake)
)

// LostRank reports whether err is a failure a job can recover from by
// replacing one rank (its process died or stalled), and which rank: the
// survivors can then Rejoin with the replacement's address and
// incarnation. A mismatch, an abort or a handshake failure is not such a
// failure.
func LostRank(err error) (rank int, ok bool) {
	var pe *PeerError
	if !errors.As(err, &pe) || pe.Rank < 0 {
		return -1, false
	}
	if errors.Is(err, ErrPeerLost) || errors.Is(err, ErrPeerTimeout) {
		return pe.Rank, true
	}
	return -1, false
}

// PeerError names the rank that an error is blamed on. Failures detected
// on another rank and relayed to this one carry the rank they blame, not
// the rank that relayed them, so every surviving rank names the same
// culprit.
type PeerError struct {
	// Rank is the rank the failure is blamed on.
	Rank int
	// Addr is that rank's peer address (host:port) from Config.Peers.
	Addr string
	// Err is what happened; it wraps one of the package's sentinel errors.
	Err error
}

// Error implements error.
func (e *PeerError) Error() string {
	if e.Addr == "" {
		return fmt.Sprintf("peer rank %d: %v", e.Rank, e.Err)
	}
	return fmt.Sprintf("peer rank %d (%s): %v", e.Rank, e.Addr, e.Err)
}

// Unwrap returns the underlying error.
func (e *PeerError) Unwrap() error { return e.Err }

// failCode is the kind of a failure as carried in abort notices between
// ranks. Zero is invalid on the wire.
type failCode uint8

const (
	codeLost failCode = iota + 1
	codeTimeout
	codeAborted
	codeMismatch
	// codeHandshake is a refused handshake; a rank that does not know it
	// (older than the code) reads it as an abort.
	codeHandshake
)

func (c failCode) sentinel() error {
	switch c {
	case codeLost:
		return ErrPeerLost
	case codeTimeout:
		return ErrPeerTimeout
	case codeMismatch:
		return ErrMismatch
	case codeHandshake:
		return ErrHandshake
	default:
		return ErrAborted
	}
}

// codeOf classifies err for an abort notice.
func codeOf(err error) failCode {
	switch {
	case errors.Is(err, ErrPeerLost):
		return codeLost
	case errors.Is(err, ErrPeerTimeout):
		return codeTimeout
	case errors.Is(err, ErrMismatch):
		return codeMismatch
	case errors.Is(err, ErrAborted):
		return codeAborted
	case errors.Is(err, ErrHandshake):
		return codeHandshake
	default:
		return codeAborted
	}
}
