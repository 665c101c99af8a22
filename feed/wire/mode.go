package wire

import (
	"errors"
	"fmt"
	"strings"
)

// Mode says how a training process gets its data.
type Mode string

// The feed modes.
const (
	// ModeArrow streams Arrow IPC record batches over the socket.
	ModeArrow Mode = "arrow"
	// ModeTensor streams dense little-endian float32 matrices over the socket.
	ModeTensor Mode = "tensor"
	// ModeDirect hands the process a JSON description of its splits.
	ModeDirect Mode = "direct"
)

// Sentinel errors of the package.
var (
	// ErrUnknownMode is returned for a mode name that is not arrow, tensor or direct.
	ErrUnknownMode = errors.New("wire: unknown feed mode")
	// ErrNotNumeric is returned when tensor mode is asked to convert a
	// column that is not an integer, float or boolean column.
	ErrNotNumeric = errors.New("wire: column is not numeric")
	// ErrTruncated is returned by the clients when a stream ends before its
	// end-of-stream marker: the executor stopped or failed mid-epoch.
	ErrTruncated = errors.New("wire: feed stream ended early")
	// ErrBadStream is returned by the clients for bytes that do not follow
	// the protocol.
	ErrBadStream = errors.New("wire: malformed feed stream")
)

// ParseMode turns a mode name ("arrow", "tensor", "direct", any case)
// into a Mode.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case ModeArrow, ModeTensor, ModeDirect:
		return m, nil
	}
	return "", fmt.Errorf("%w %q (want arrow, tensor or direct)", ErrUnknownMode, s)
}

// String returns the mode's name.
func (m Mode) String() string { return string(m) }

// streams reports whether the mode feeds over a socket.
func (m Mode) streams() bool { return m == ModeArrow || m == ModeTensor }
