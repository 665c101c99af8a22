package collective

import (
	"encoding/binary"
	"fmt"
	"net"
	"unsafe"
)

// The ring protocol of one shared-memory stream. The sender fills the
// slots in turn, each with one piece of one Send, and writes the piece's
// length (4 bytes, little-endian) on the stream; the receiver reads the
// lengths and takes the bytes out of the slots. The system calls on the
// stream order the copies into and out of a slot.
//
// The receiver counts the slots it has emptied in the ring's header. A
// sender that finds every slot full raises the header's wake flag and
// waits for one byte on the stream, which the receiver writes when it
// takes the flag down after emptying a slot. The receiver writes nothing
// it was not asked for: a byte arriving after the sender closed its end
// would reset the connection and throw away lengths the receiver has yet
// to read.

// armFunc sets the deadline of the next read (or write) on the stream and
// reports whether the call may go on; the link's timeout, cancellation
// and interrupts act through it.
type armFunc func(c *net.TCPConn, write bool) error

// shmSender is the sending end of a ring.
type shmSender struct {
	seg    *shmSegment
	c      *net.TCPConn
	filled uint64 // slots filled so far
	wake   [1]byte
	msg    [4]byte
}

// waitFree waits until the receiver has emptied a slot of a full ring.
func (s *shmSender) waitFree(arm armFunc) error {
	consumed, want := s.seg.consumed(), s.seg.wantWake()
	for s.filled-consumed.Load() >= shmSlots {
		want.Store(1)
		if s.filled-consumed.Load() < shmSlots && want.Swap(0) == 1 {
			return nil // emptied meanwhile, and no byte will come
		}
		if err := arm(s.c, false); err != nil {
			return err
		}
		if _, err := s.c.Read(s.wake[:]); err != nil {
			return err
		}
	}
	return nil
}

// send copies p into the ring, a slot at a time.
func (s *shmSender) send(p []byte, arm armFunc) error {
	for len(p) > 0 {
		if err := s.waitFree(arm); err != nil {
			return err
		}
		n := copy(s.seg.slot(int(s.filled%shmSlots)), p)
		binary.LittleEndian.PutUint32(s.msg[:], uint32(n))
		if err := arm(s.c, true); err != nil {
			return err
		}
		if _, err := s.c.Write(s.msg[:]); err != nil {
			return err
		}
		s.filled++
		p = p[n:]
	}
	return nil
}

// shmReceiver is the receiving end of a ring.
type shmReceiver struct {
	seg *shmSegment
	c   *net.TCPConn
	cur int // the slot being emptied
	// off and avail: where the unread bytes of slot cur start, and how
	// many there are.
	off, avail int
	// lens buffers the lengths read from the stream: lens[lo:hi] unparsed.
	lens   [4 * shmSlots]byte
	lo, hi int
	one    [1]byte
	// emptied counts the slots emptied, as the header does for the sender.
	emptied uint64
}

// piece returns the unread bytes of the current slot, waiting for the
// sender to fill the next one when the current one is empty.
func (r *shmReceiver) piece(arm armFunc) ([]byte, error) {
	if r.avail > 0 {
		return r.seg.slot(r.cur)[r.off : r.off+r.avail], nil
	}
	for r.hi-r.lo < 4 {
		if r.lo > 0 {
			r.hi = copy(r.lens[:], r.lens[r.lo:r.hi])
			r.lo = 0
		}
		if err := arm(r.c, false); err != nil {
			return nil, err
		}
		n, err := r.c.Read(r.lens[r.hi:])
		r.hi += n
		if err != nil && r.hi-r.lo < 4 {
			return nil, err
		}
	}
	n := int(binary.LittleEndian.Uint32(r.lens[r.lo:]))
	r.lo += 4
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
	r.seg.consumed().Store(r.emptied)
	if r.seg.wantWake().Swap(0) == 0 {
		return nil
	}
	r.one[0] = 1
	if err := arm(r.c, true); err != nil {
		return err
	}
	_, err := r.c.Write(r.one[:])
	return err
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
