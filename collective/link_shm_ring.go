package collective

import (
	"fmt"
	"net"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// The ring protocol of one shared-memory stream. The sender fills the
// slots in turn, each with one piece of one Send: it writes the piece's
// length into the slot's word in the header and then counts the slot
// filled in the header; the receiver takes the bytes out of the slots and
// counts them emptied. Both counters are sequentially consistent atomics
// on memory the two processes share, so a piece is visible before its
// count is.
//
// The TCP stream is each end's doorbell, rung only for an end that sleeps.
// An end that finds nothing to do (the receiver an empty ring, the sender
// a full one) first polls the other's counter for a moment (shmSpin),
// yielding the processor each time; then it raises its flag in the header
// ("armed"), checks the counter once more, and only then blocks on the
// stream for one byte. The other end, having moved its counter, writes
// that byte only when it finds the flag raised and is the one to take it
// down. This is Dekker's handshake: each end stores (its counter, its
// flag) and then loads the other's word, and with sequentially consistent
// atomics at least one of the two sees the other's store, so either the
// sleeper's re-check finds the new count or the mover finds the flag. The
// sleeper whose re-check succeeds takes its own flag down; if the mover
// took it first, the byte is on its way and the sleeper reads it, so a
// byte is written only when asked for and always read: none is left on a
// stream to reset it when an end closes. An end that is awake costs its
// peer no system call at all.

// shmSpin bounds how long an end polls the ring before it sleeps on the
// stream; shmSpinChecks bounds the polls (each yields the processor).
// Polling pays when the peer is running: two ranks on two idle cores
// exchange a piece without a system call. With more ranks than cores it
// costs the peer the core it needs, so each end's polls adapt (spin).
var (
	shmSpin       = 20 * time.Microsecond
	shmSpinChecks = 64
)

// shmBeforeArm, when set (by tests), runs just before an end raises its
// flag: where the other end's move is easiest to lose.
var shmBeforeArm func()

// armFunc sets the deadline of the next read (or write) on the stream and
// reports whether the call may go on; the link's timeout, cancellation
// and interrupts act through it.
type armFunc func(c *net.TCPConn, write bool) error

// The header's shared words, each on a cache line of its own: the slots
// emptied by the receiver and filled by the sender, each end's flag that
// it sleeps on the stream, and the lengths of the slots' pieces.
const (
	shmConsumedAt    = 64
	shmSenderArmed   = 128
	shmFilledAt      = 192
	shmReceiverArmed = 256
	shmLensAt        = 320
)

func (s *shmSegment) word(at int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&s.mem[at]))
}

func (s *shmSegment) flag(at int) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&s.mem[at]))
}

// pieceLen is the length word of slot i.
func (s *shmSegment) pieceLen(i int) *atomic.Uint32 {
	return s.flag(shmLensAt + 4*i)
}

// doorbell is one end's side of the handshake on a stream.
type doorbell struct {
	c     *net.TCPConn
	one   [1]byte
	polls int // how many times spin polls; 0 until the first wait
}

// wait returns once word no longer holds stale, polling for at most
// shmSpin and then sleeping on the stream under armed.
func (d *doorbell) wait(word *atomic.Uint64, stale uint64, armed *atomic.Uint32, arm armFunc) error {
	if word.Load() != stale || d.spin(word, stale) {
		return nil
	}
	for {
		if shmBeforeArm != nil {
			shmBeforeArm()
		}
		armed.Store(1)
		if word.Load() != stale && armed.Swap(0) == 1 {
			return nil // moved meanwhile, and no byte will come
		}
		// Armed, or the other end took the flag down: its byte comes.
		if err := arm(d.c, false); err != nil {
			return err
		}
		if _, err := d.c.Read(d.one[:]); err != nil {
			return err
		}
		if word.Load() != stale {
			return nil
		}
	}
}

// ring wakes the other end if it sleeps on armed, after this end moved its
// counter.
func (d *doorbell) ring(armed *atomic.Uint32, arm armFunc) error {
	if armed.Load() == 0 || armed.Swap(0) == 0 {
		return nil
	}
	d.one[0] = 1
	if err := arm(d.c, true); err != nil {
		return err
	}
	_, err := d.c.Write(d.one[:])
	return err
}

// spin polls word for a change, yielding between polls, for at most
// shmSpin and d.polls polls. The number of polls adapts to the peer: it
// doubles (up to shmSpinChecks) when polling found the change and halves
// when it did not, so an end whose peer keeps it waiting long (more ranks
// than cores) soon polls once or twice and sleeps.
func (d *doorbell) spin(word *atomic.Uint64, stale uint64) bool {
	if d.polls == 0 {
		d.polls = shmSpinChecks
	}
	if d.polls <= 0 {
		return false
	}
	start := time.Now()
	for i := 1; i <= d.polls; i++ {
		runtime.Gosched()
		if word.Load() != stale {
			d.polls = min(2*d.polls, shmSpinChecks)
			return true
		}
		if i%8 == 0 && time.Since(start) > shmSpin {
			break
		}
	}
	d.polls = max(d.polls/2, 1)
	return false
}

// shmSender is the sending end of a ring.
type shmSender struct {
	seg    *shmSegment
	bell   doorbell
	filled uint64 // slots filled so far
}

// send copies p into the ring, a slot at a time.
func (s *shmSender) send(p []byte, arm armFunc) error {
	consumed, filled := s.seg.word(shmConsumedAt), s.seg.word(shmFilledAt)
	for len(p) > 0 {
		if s.filled-consumed.Load() >= shmSlots {
			// Full: wait for the receiver to empty the oldest slot.
			if err := s.bell.wait(consumed, s.filled-shmSlots, s.seg.flag(shmSenderArmed), arm); err != nil {
				return err
			}
		}
		i := int(s.filled % shmSlots)
		n := copy(s.seg.slot(i), p)
		s.seg.pieceLen(i).Store(uint32(n))
		s.filled++
		filled.Store(s.filled)
		if err := s.bell.ring(s.seg.flag(shmReceiverArmed), arm); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// shmReceiver is the receiving end of a ring.
type shmReceiver struct {
	seg  *shmSegment
	bell doorbell
	cur  int // the slot being emptied
	// off and avail: where the unread bytes of slot cur start, and how
	// many there are.
	off, avail int
	// emptied counts the slots emptied, as the header does for the sender.
	emptied uint64
}

// piece returns the unread bytes of the current slot, waiting for the
// sender to fill the next one when the current one is empty.
func (r *shmReceiver) piece(arm armFunc) ([]byte, error) {
	if r.avail > 0 {
		return r.seg.slot(r.cur)[r.off : r.off+r.avail], nil
	}
	if err := r.bell.wait(r.seg.word(shmFilledAt), r.emptied, r.seg.flag(shmReceiverArmed), arm); err != nil {
		return nil, err
	}
	n := int(r.seg.pieceLen(r.cur).Load())
	if n <= 0 || n > shmSlotBytes {
		return nil, fmt.Errorf("shared-memory ring: slot of %d bytes announced", n)
	}
	r.off, r.avail = 0, n
	return r.seg.slot(r.cur)[:n], nil
}

// consume marks n bytes of the current piece read, and hands the slot back
// to the sender once it is empty.
func (r *shmReceiver) consume(n int, arm armFunc) error {
	r.off += n
	r.avail -= n
	if r.avail > 0 {
		return nil
	}
	r.cur = (r.cur + 1) % shmSlots
	r.emptied++
	r.seg.word(shmConsumedAt).Store(r.emptied)
	return r.bell.ring(r.seg.flag(shmSenderArmed), arm)
}

// recv copies the next len(p) bytes of the stream into p.
func (r *shmReceiver) recv(p []byte, arm armFunc) error {
	for len(p) > 0 {
		b, err := r.piece(arm)
		if err != nil {
			return err
		}
		n := copy(p, b)
		if err := r.consume(n, arm); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// recvInPlace passes the next n bytes of the stream to fn where they lie
// in the ring, in pieces whose lengths and addresses are multiples of
// align. A piece that is not (a Send cut elsewhere than at an element) is
// gathered into scratch first; len(scratch) is a multiple of align.
func (r *shmReceiver) recvInPlace(n, align int, scratch []byte, fn func([]byte), arm armFunc) error {
	for n > 0 {
		b, err := r.piece(arm)
		if err != nil {
			return err
		}
		take := min(len(b), n)
		if take%align == 0 && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%uintptr(align) == 0 {
			fn(b[:take])
			if err := r.consume(take, arm); err != nil {
				return err
			}
			n -= take
			continue
		}
		m := min(n, len(scratch))
		if err := r.recv(scratch[:m], arm); err != nil {
			return err
		}
		fn(scratch[:m])
		n -= m
	}
	return nil
}
