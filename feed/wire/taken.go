package wire

import (
	"net"
	"sync"

	"golang.org/x/sys/unix"
)

// takenTracker follows what the consumer has taken off the socket, as
// opposed to what the server has written into it: the socket's send
// buffer and the consumer's receive queue hold megabytes of read-ahead, so
// counting writes reports batches the training process has not seen.
//
// The kernel counts, per Unix socket, the bytes written but not yet read
// by the peer (SIOCOUTQ); bytes written minus that are bytes taken. Each
// batch is remembered with the stream offset where it ends, and counts as
// taken once the consumer has read past it. The kernel's count includes
// some bookkeeping per buffer, so the estimate errs on the low side while
// data is queued and is exact once the queue is empty.
type takenTracker struct {
	mu      sync.Mutex
	conn    *net.UnixConn // the connection being tracked, nil between connections
	base    int64         // bytes written before this connection
	written func() int64  // bytes written so far, over every connection
	marks   []takenMark   // batches written on conn and not yet taken, in order
	rows    int64         // rows taken, over every connection
	batches int64
}

// takenMark is a batch on its way: where it ends in the connection's
// stream, and its rows.
type takenMark struct {
	end  int64
	rows int64
}

// begin starts tracking conn. Batches still pending on the previous
// connection count as taken: a consumer asks for the next epoch only once
// it is done with the last.
func (t *takenTracker) begin(conn *net.UnixConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.settleLocked()
	t.conn, t.base = conn, t.written()
}

// sent records a batch of rows whose last byte is now written or queued
// at stream offset end (bytes written over every connection).
func (t *takenTracker) sent(end, rows int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.marks = append(t.marks, takenMark{end: end - t.base, rows: rows})
}

// end stops watching the connection, which is about to be closed: what
// the consumer took is counted now, the rest when the next connection
// begins (or never, if none does).
func (t *takenTracker) end() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pollLocked()
	t.conn = nil
}

// settleLocked counts every pending batch as taken.
func (t *takenTracker) settleLocked() {
	for _, m := range t.marks {
		t.rows += m.rows
		t.batches++
	}
	t.marks = t.marks[:0]
}

// pollLocked moves the batches the consumer has read past to the taken
// counts.
func (t *takenTracker) pollLocked() {
	if t.conn == nil || len(t.marks) == 0 {
		return
	}
	queued, ok := outQueue(t.conn)
	if !ok {
		return
	}
	taken := t.written() - t.base - queued
	i := 0
	for ; i < len(t.marks) && t.marks[i].end <= taken; i++ {
		t.rows += t.marks[i].rows
		t.batches++
	}
	t.marks = append(t.marks[:0], t.marks[i:]...)
}

// taken returns the rows and batches taken so far.
func (t *takenTracker) taken() (rows, batches int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pollLocked()
	return t.rows, t.batches
}

// outQueue returns the bytes written to conn that its peer has not read.
func outQueue(conn *net.UnixConn) (int64, bool) { return sockQueue(conn, unix.SIOCOUTQ) }

// inQueue returns the bytes conn's peer wrote that have not been read
// from it.
func inQueue(conn *net.UnixConn) (int64, bool) { return sockQueue(conn, unix.SIOCINQ) }

// sockQueue returns the length of one of conn's queues (req: SIOCOUTQ or
// SIOCINQ).
func sockQueue(conn *net.UnixConn, req uint) (int64, bool) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return 0, false
	}
	var n int
	var ioErr error
	if err := rc.Control(func(fd uintptr) { n, ioErr = unix.IoctlGetInt(int(fd), req) }); err != nil || ioErr != nil {
		return 0, false
	}
	return int64(n), true
}
