package collective

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Ranks on one host move their bytes through shared memory. Over loopback
// TCP every byte is copied twice by the kernel (into the socket buffer and
// out of it) beside the system calls and buffer bookkeeping of each
// segment; through a shared ring it is copied once, by the sender, and the
// receiver reduces it where it lies. The TCP stream stays as the
// doorbell of an end that sleeps (link_shm_ring.go): one byte wakes it,
// so waiting, timeouts, interrupts and a dead peer behave exactly as on
// TCP, through the runtime's network poller, while two ends that are
// both awake exchange pieces without a system call.
//
// The sender of each stream creates the ring in a file under /dev/shm and
// offers its name, its host's boot id and a random nonce; the receiver maps
// it when the boot ids match and the nonce is in the file, and answers
// yes or no; the sender then removes the file, which lives on in the two
// mappings. Anything that fails (another host, a container with its own
// /dev/shm, no /dev/shm) leaves the stream on TCP.

// Ring geometry: slots of shmSlotBytes, each filled by one piece of one
// Send and announced by one doorbell. A slot of 1 MiB (a core's L2 here)
// and 8 of them measured best with more ranks than cores: smaller slots
// cost more doorbells, and a ring of 8 MiB lets a sender run ahead while
// its receiver waits for a core.
const (
	shmSlots     = 8
	shmSlotBytes = 1 << 20
	shmHeadBytes = 4096
	shmSegBytes  = shmHeadBytes + shmSlots*shmSlotBytes
)

// shmMagic opens both the hello on the stream and the segment's header;
// it names the ring protocol's version, so that a peer with another one
// fails the hello instead of misreading the ring.
const shmMagic = "SPS2"

// shmDir is where rings are created: a memory file system on Linux.
var shmDir = "/dev/shm"

// shmBudget bounds the ring memory one process reserves (its sending
// ends); streams beyond it stay on TCP. Many ranks in one process (tests,
// benchmarks of 64 in-process ranks) would otherwise reserve gigabytes.
var shmBudget int64 = 512 << 20

// shmReserved is the ring memory this process has reserved.
var shmReserved atomic.Int64

// shmHello is what the sender of a stream offers its receiver.
type shmHello struct {
	boot  string // the sender's host boot id; empty: no shared memory offered
	nonce [16]byte
	path  string
}

func (h shmHello) encode() []byte {
	b := []byte(shmMagic)
	b = binary.BigEndian.AppendUint16(b, uint16(len(h.boot)))
	b = append(b, h.boot...)
	b = append(b, h.nonce[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(h.path)))
	return append(b, h.path...)
}

func readShmHello(r io.Reader) (shmHello, error) {
	var h shmHello
	var head [len(shmMagic) + 2]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return h, err
	}
	if string(head[:len(shmMagic)]) != shmMagic {
		return h, errors.New("the peer does not run this version's tcp link (no shared-memory hello)")
	}
	boot := make([]byte, binary.BigEndian.Uint16(head[len(shmMagic):]))
	if _, err := io.ReadFull(r, boot); err != nil {
		return h, err
	}
	if _, err := io.ReadFull(r, h.nonce[:]); err != nil {
		return h, err
	}
	var n [2]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return h, err
	}
	path := make([]byte, binary.BigEndian.Uint16(n[:]))
	if _, err := io.ReadFull(r, path); err != nil {
		return h, err
	}
	h.boot, h.path = string(boot), string(path)
	return h, nil
}

// bootID names this boot of this host: two processes that read the same
// one share its memory (unless their /dev/shm differ, which the nonce
// check catches).
var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})

// shmSetup runs the shared-memory hello on every stream of s at once and
// returns the rings of the streams that use one: sends[p] for the stream
// to rank p, recvs[p] for the one from it. Streams without a ring carry
// their data over TCP.
func shmSetup(ctx context.Context, s LinkSetup, enabled bool) (sends []*shmSender, recvs []*shmReceiver, err error) {
	sends, recvs = make([]*shmSender, len(s.Out)), make([]*shmReceiver, len(s.In))
	deadline := s.setupDeadline(ctx)
	var wg sync.WaitGroup
	errs := make([]error, len(s.Out)+len(s.In))
	start := func(i int, c *net.TCPConn, fn func(*net.TCPConn) error) {
		if c == nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetDeadline(deadline)
			stop := context.AfterFunc(ctx, func() { c.SetDeadline(aLongTimeAgo) })
			errs[i] = fn(c)
			stop()
			c.SetDeadline(time.Time{})
		}()
	}
	for p, c := range s.Out {
		start(p, c, func(c *net.TCPConn) (err error) {
			sends[p], err = offerRing(c, enabled)
			if err != nil {
				return fmt.Errorf("shared-memory hello to rank %d: %w", p, err)
			}
			return nil
		})
	}
	for p, c := range s.In {
		start(len(s.Out)+p, c, func(c *net.TCPConn) (err error) {
			recvs[p], err = acceptRing(c, enabled)
			if err != nil {
				return fmt.Errorf("shared-memory hello from rank %d: %w", p, err)
			}
			return nil
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeRings(sends, recvs)
		return nil, nil, err
	}
	return sends, recvs, nil
}

// offerRing is the sender's side of the hello on c: it offers a new ring
// and keeps it when the receiver mapped it.
func offerRing(c *net.TCPConn, enabled bool) (*shmSender, error) {
	var h shmHello
	var seg *shmSegment
	if enabled && bootID() != "" {
		var err error
		if seg, err = createSegment(); err == nil {
			h = shmHello{boot: bootID(), nonce: seg.nonce, path: seg.path}
			defer os.Remove(seg.path) // both ends have mapped it, or it is dropped
		}
	}
	if _, err := c.Write(h.encode()); err != nil {
		seg.close()
		return nil, err
	}
	var yes [1]byte
	if _, err := io.ReadFull(c, yes[:]); err != nil {
		seg.close()
		return nil, err
	}
	if yes[0] != 1 || seg == nil {
		seg.close()
		return nil, nil
	}
	return &shmSender{seg: seg, bell: doorbell{c: c}}, nil
}

// acceptRing is the receiver's side of the hello on c: it maps the
// offered ring when it can and answers whether it did.
func acceptRing(c *net.TCPConn, enabled bool) (*shmReceiver, error) {
	h, err := readShmHello(c)
	if err != nil {
		return nil, err
	}
	var seg *shmSegment
	if enabled && h.path != "" && h.boot == bootID() {
		seg, _ = openSegment(h.path, h.nonce) // any failure: TCP
	}
	yes := []byte{0}
	if seg != nil {
		yes[0] = 1
	}
	if _, err := c.Write(yes); err != nil {
		seg.close()
		return nil, err
	}
	if seg == nil {
		return nil, nil
	}
	return &shmReceiver{seg: seg, bell: doorbell{c: c}}, nil
}

func closeRings(sends []*shmSender, recvs []*shmReceiver) {
	for _, s := range sends {
		if s != nil {
			s.seg.close()
		}
	}
	for _, r := range recvs {
		if r != nil {
			r.seg.close()
		}
	}
}

// shmSegment is one mapped ring.
type shmSegment struct {
	mem   []byte
	path  string
	nonce [16]byte
	owned bool // created here: counted in shmReserved
}

// slot returns ring slot i.
func (s *shmSegment) slot(i int) []byte {
	lo := shmHeadBytes + i*shmSlotBytes
	return s.mem[lo : lo+shmSlotBytes : lo+shmSlotBytes]
}

// createSegment creates, sizes and maps a new ring file and writes its
// header: the magic and a fresh nonce.
func createSegment() (*shmSegment, error) {
	if shmReserved.Add(shmSegBytes) > shmBudget {
		shmReserved.Add(-shmSegBytes)
		return nil, errors.New("this process's shared-memory rings are at their budget")
	}
	seg, err := createSegmentFile()
	if err != nil {
		shmReserved.Add(-shmSegBytes)
		return nil, err
	}
	seg.owned = true
	return seg, nil
}

func createSegmentFile() (*shmSegment, error) {
	f, err := os.CreateTemp(shmDir, "spindle-link-")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	seg := &shmSegment{path: f.Name()}
	if _, err := rand.Read(seg.nonce[:]); err != nil {
		os.Remove(seg.path)
		return nil, err
	}
	// The pages are reserved now: a full /dev/shm (a container's is often
	// 64 MB) refuses the ring here, and the stream stays on TCP, instead
	// of killing the process with SIGBUS at the first write to a page the
	// file system cannot supply.
	if err := reserve(f, shmSegBytes); err != nil {
		os.Remove(seg.path)
		return nil, err
	}
	if seg.mem, err = mapShared(f, shmSegBytes); err != nil {
		os.Remove(seg.path)
		return nil, err
	}
	copy(seg.mem, shmMagic)
	copy(seg.mem[len(shmMagic):], seg.nonce[:])
	return seg, nil
}

// openSegment maps the ring file at path and checks that it is the one
// offered: the magic and nonce in its header.
func openSegment(path string, nonce [16]byte) (*shmSegment, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.Size() != shmSegBytes {
		return nil, fmt.Errorf("ring %s is not %d bytes", path, shmSegBytes)
	}
	mem, err := mapShared(f, shmSegBytes)
	if err != nil {
		return nil, err
	}
	seg := &shmSegment{mem: mem, path: path, nonce: nonce}
	if string(mem[:len(shmMagic)]) != shmMagic || [16]byte(mem[len(shmMagic):len(shmMagic)+16]) != nonce {
		seg.close()
		return nil, fmt.Errorf("ring %s: not the one offered", path)
	}
	return seg, nil
}

func (s *shmSegment) close() {
	if s != nil && s.mem != nil {
		unmapShared(s.mem)
		s.mem = nil
		if s.owned {
			shmReserved.Add(-shmSegBytes)
		}
	}
}
