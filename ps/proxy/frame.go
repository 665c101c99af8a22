package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
)

// The protocol, as docs/ps-python.md describes it. Every message, either
// way, is a frame: a little-endian uint32 counting the bytes that follow,
// then those bytes. A request's first byte is its op; a reply's first byte
// is its status. Integers are little-endian; keys are uint64s and rows and
// gradients float32s, as raw little-endian arrays.
const (
	opDeclare byte = 1 // JSON table spec → nothing
	opPull    byte = 2 // name, keys → uint32 dim, rows
	opPush    byte = 3 // name, uint32 n, n keys, n×dim gradients → nothing
	opClock   byte = 4 // nothing → int64 steps finished
	opStats   byte = 5 // nothing → JSON statistics
	opLeave   byte = 6 // nothing → nothing
	opBarrier byte = 7 // nothing → nothing
	opExport  byte = 8 // name, URI (to the end) → uint64 rows written
)

// Reply statuses.
const (
	statusOK    byte = 0
	statusError byte = 1 // the body is a UTF-8 message saying what failed
)

// MaxRequestBytes bounds one request frame: 1 GiB, four times what one
// server takes in a message, since a call is split over the servers.
const MaxRequestBytes = 1 << 30

// errFrameTooLarge is wrapped when a frame's length is over the bound; the
// connection cannot go on, since the proxy does not read that frame.
var errFrameTooLarge = errors.New("ps proxy: frame too large")

// readFrame reads one frame's body from r into buf (grown as needed).
func readFrame(r io.Reader, buf []byte) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n > MaxRequestBytes {
		return nil, fmt.Errorf("%w: %d bytes, the bound is %d", errFrameTooLarge, n, MaxRequestBytes)
	}
	if n == 0 {
		return nil, errors.New("ps proxy: empty frame: a request starts with its op")
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("read a %d-byte frame: %w", n, io.ErrUnexpectedEOF)
	}
	return buf, nil
}

// writeReply writes one reply frame: status, then the parts of its body.
func writeReply(w io.Writer, status byte, parts ...[]byte) error {
	n := 1
	for _, p := range parts {
		n += len(p)
	}
	if uint64(n) > 1<<32-1 {
		return writeReply(w, statusError, []byte(fmt.Sprintf("reply of %d bytes does not fit a frame: ask for fewer keys at once", n)))
	}
	hdr := make([]byte, 5)
	binary.LittleEndian.PutUint32(hdr, uint32(n))
	hdr[4] = status
	// One writev for the header and the arrays: no copy of the rows.
	nb := make(net.Buffers, 0, 1+len(parts))
	for _, b := range append([][]byte{hdr}, parts...) {
		if len(b) > 0 {
			nb = append(nb, b)
		}
	}
	_, err := nb.WriteTo(w)
	return err
}

// reader takes a request body apart, remembering the first thing that was
// missing.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b) < n {
		r.err = fmt.Errorf("request ends before its %s (%d bytes left, want %d)", what, len(r.b), n)
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) uint16(what string) int {
	b := r.take(2, what)
	if b == nil {
		return 0
	}
	return int(binary.LittleEndian.Uint16(b))
}

func (r *reader) uint32(what string) int {
	b := r.take(4, what)
	if b == nil {
		return 0
	}
	return int(binary.LittleEndian.Uint32(b))
}

// name reads a table name: a uint16 length and UTF-8 bytes.
func (r *reader) name() string {
	n := r.uint16("table name length")
	b := r.take(n, "table name")
	if r.err == nil && n == 0 {
		r.err = errors.New("empty table name")
	}
	return string(b)
}

// rest returns what is left.
func (r *reader) rest() []byte {
	b := r.b
	r.b = nil
	return b
}
