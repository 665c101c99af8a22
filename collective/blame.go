package collective

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// Failure diagnosis on the mesh: notices, probes and the one rank blamed.

const (
	// culpritNoticeTimeout bounds telling the rank blamed for a failure;
	// a live one answers from its accept loop at once.
	culpritNoticeTimeout = 500 * time.Millisecond
	// noticeGrace is how long a rank whose link just broke waits for a
	// notice before blaming the peer at the other end of that link. The
	// notice, when one comes, names the rank that really failed rather
	// than a neighbour that merely gave up because of it.
	noticeGrace = 250 * time.Millisecond
)

// Done returns a channel that is closed once the mesh has failed (or was
// closed) and the other members have been told.
func (m *Mesh) Done() <-chan struct{} { return m.settled }

// Err returns the mesh's failure once Done is closed, and nil before. The
// error wraps one of the package's sentinel errors and, when a rank is to
// blame, is or wraps a *PeerError naming it: the same rank on every member.
func (m *Mesh) Err() error {
	select {
	case <-m.settled:
		return m.cause
	default:
		return nil
	}
}

// Abort gives up on the mesh on purpose (a cancelled context, a detected
// mismatch, a member shutting down mid-job): every member fails with an
// error wrapping ErrAborted and cause, blaming this rank.
func (m *Mesh) Abort(cause error) {
	m.fail(fmt.Errorf("%w: rank %d: %w", ErrAborted, m.cfg.Rank, cause), m.cfg.Rank, true)
}

// Blame reports that talking to peer failed with err (a broken connection,
// a deadline, a failed call) and returns the mesh's failure, which every
// member then shares. It first waits briefly for a notice from the rank
// that really failed; on a timeout it asks peer what it is blocked on, and
// when peer is itself waiting on another rank it waits for that rank's
// neighbour to name it. Only then does it blame peer and tell the others.
// A done ctx means this rank gave up: it is blamed itself (ErrAborted).
// Errors wrapping os.ErrDeadlineExceeded, ErrPeerTimeout or a net.Error
// whose Timeout is true count as timeouts; any other as a lost peer.
func (m *Mesh) Blame(ctx context.Context, peer int, err error) error {
	return m.linkFailed(ctx, peer, err, "call")
}

// Failed reports whether the mesh has failed or was closed.
func (m *Mesh) Failed() bool { return m.isFailed() }

// noteActive records the peer this rank is about to wait on, for probes;
// it returns the function that clears it.
func (m *Mesh) noteActive(peer int, write bool) func() {
	a := &m.recvPeer
	if write {
		a = &m.sendPeer
	}
	a.Store(int32(peer + 1))
	return func() { a.Store(0) }
}

// onInterrupt registers fn to run once, as soon as the mesh fails: a data
// link's Interrupt, so that its pending calls return. If the mesh has
// already failed, fn runs now.
func (m *Mesh) onInterrupt(fn func()) {
	m.failMu.Lock()
	if m.cause == nil {
		m.onFail = append(m.onFail, fn)
		m.failMu.Unlock()
		return
	}
	m.failMu.Unlock()
	fn()
}

// onNotice records a failure reported by rank from.
func (m *Mesh) onNotice(from int, n notice) {
	culprit := int(n.culprit)
	if culprit >= m.cfg.WorldSize {
		culprit = from
	}
	if culprit == m.cfg.Rank && n.code == codeHandshake {
		m.awaitOwnSetup()
	}
	m.log.Debug("failure notice", "from", from, "culprit", culprit, "msg", n.msg)
	m.settle(&PeerError{
		Rank: culprit,
		Addr: m.Addr(culprit),
		Err:  &remoteError{reporter: from, kind: n.code.sentinel(), msg: n.msg},
	}, culprit, false, false)
}

// remoteError is a failure detected by another rank and relayed here.
type remoteError struct {
	reporter int
	kind     error
	msg      string
}

func (e *remoteError) Error() string {
	return fmt.Sprintf("reported by rank %d: %s", e.reporter, e.msg)
}

func (e *remoteError) Unwrap() error { return e.kind }

// linkFailed turns an I/O error on the link with peer into the mesh's
// sticky failure and returns it.
func (m *Mesh) linkFailed(ctx context.Context, peer int, ioErr error, verb string) error {
	if m.isFailed() {
		<-m.settled
		return m.cause
	}
	if ctx.Err() != nil {
		m.fail(fmt.Errorf("%w: rank %d: %w", ErrAborted, m.cfg.Rank, context.Cause(ctx)), m.cfg.Rank, true)
		return m.cause
	}
	// Give the rank that really failed a moment to tell us about it.
	timer := time.NewTimer(noticeGrace)
	select {
	case <-m.failed:
		timer.Stop()
		<-m.settled
		return m.cause
	case <-timer.C:
	}
	var kind error = ErrPeerLost
	detail := ""
	if isTimeout(ioErr) {
		kind = ErrPeerTimeout
		d := m.diagnose(peer)
		detail = d.detail
		if d.culprit >= 0 && d.culprit != peer {
			// The peer failed already, blaming a rank whose notice did not
			// reach this one (a partition): blame the same rank.
			m.fail(&PeerError{Rank: d.culprit, Addr: m.Addr(d.culprit),
				Err: fmt.Errorf("%w: %s: %w%s", kind, verb, ioErr, detail)}, d.culprit, true)
			return m.cause
		}
		if d.waitsOn >= 0 {
			// The peer is alive and waits on another rank. Ask that rank
			// directly: when it does not answer either (a partition
			// between it and this one, or it is gone), it is the one.
			if _, err := m.probe(d.waitsOn); err != nil {
				m.fail(&PeerError{Rank: d.waitsOn, Addr: m.Addr(d.waitsOn),
					Err: fmt.Errorf("%w: %s: %w%s, and rank %d does not answer this rank either: %v", kind, verb, ioErr, detail, d.waitsOn, err)}, d.waitsOn, true)
				return m.cause
			}
		}
		if d.waitsOn >= 0 {
			// The peer is alive and itself waiting on another rank: whoever
			// is next to the rank that really stalled will name it. Wait for
			// that notice, but not forever.
			m.log.Debug("peer is waiting on another rank", "peer", peer, "state", detail)
			timer := time.NewTimer(m.cfg.Timeout)
			select {
			case <-m.failed:
				timer.Stop()
				<-m.settled
				return m.cause
			case <-timer.C:
			}
		}
	}
	m.fail(&PeerError{Rank: peer, Addr: m.Addr(peer), Err: fmt.Errorf("%w: %s: %w%s", kind, verb, ioErr, detail)}, peer, true)
	return m.cause
}

// isTimeout reports whether err means no progress rather than a break.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, ErrPeerTimeout) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// diagnosis is what a probe of a silent peer found.
type diagnosis struct {
	detail string // for the error message
	// waitsOn is the rank other than this one the peer is blocked on
	// (the peer is a victim); -1 when none.
	waitsOn int
	// culprit is the rank the peer, already failed, blames; -1 when none.
	culprit int
}

// diagnose asks peer, which made no progress for the timeout, what it is
// blocked on.
func (m *Mesh) diagnose(peer int) diagnosis {
	a, err := m.probe(peer)
	timeout := m.cfg.Timeout
	d := diagnosis{waitsOn: -1, culprit: -1}
	switch {
	case err != nil:
		d.detail = fmt.Sprintf(" (no progress for %s; the peer does not answer: %v)", timeout, err)
	case a.culprit >= 0:
		d.culprit = a.culprit
		d.detail = fmt.Sprintf(" (no progress for %s; the peer has failed, blaming rank %d)", timeout, a.culprit)
	case a.recvFrom >= 0 && a.recvFrom != m.cfg.Rank:
		d.waitsOn = a.recvFrom
		d.detail = fmt.Sprintf(" (no progress for %s; the peer is waiting to receive from rank %d)", timeout, a.recvFrom)
	case a.sendTo >= 0 && a.sendTo != m.cfg.Rank:
		d.waitsOn = a.sendTo
		d.detail = fmt.Sprintf(" (no progress for %s; the peer is waiting to send to rank %d)", timeout, a.sendTo)
	case a.recvFrom < 0 && a.sendTo < 0:
		d.detail = fmt.Sprintf(" (no progress for %s; the peer is alive but not in a collective operation)", timeout)
	default:
		d.detail = fmt.Sprintf(" (no progress for %s)", timeout)
	}
	return d
}

// probe asks peer which ranks it is blocked on.
func (m *Mesh) probe(peer int) (probeAnswer, error) {
	deadline := time.Now().Add(min(m.cfg.ProbeTimeout, m.cfg.Timeout))
	ctx, cancel := context.WithDeadline(m.base, deadline)
	defer cancel()
	c, err := m.dialHello(ctx, peer, kindProbe, deadline)
	if err != nil {
		return probeAnswer{}, err
	}
	defer c.Close()
	c.SetDeadline(deadline)
	return readProbeAnswer(c)
}

func (m *Mesh) isFailed() bool {
	select {
	case <-m.failed:
		return true
	default:
		return false
	}
}

// fail makes cause the mesh's sticky error (the first caller wins), tells
// every other rank when notify is set, and then interrupts the data links'
// pending I/O. Links are not closed here, so neighbours do not see an end
// of stream that they would blame on this rank: they hear the notice
// instead. fail returns once the failure is settled, whoever recorded it.
func (m *Mesh) fail(cause error, culprit int, notify bool) {
	m.settle(cause, culprit, notify, true)
}

// settle is fail; with wait unset it does not wait for a failure that
// another goroutine is settling. Notice handlers use that: two ranks that
// fail at the same moment each wait for the other to acknowledge its
// notice, and must not wait for their own settling to do so.
func (m *Mesh) settle(cause error, culprit int, notify, wait bool) {
	m.failMu.Lock()
	first := m.cause == nil
	var hooks []func()
	if first {
		m.cause = cause
		hooks, m.onFail = m.onFail, nil
		close(m.failed)
	}
	m.failMu.Unlock()
	if !first {
		if wait {
			<-m.settled
		}
		return
	}
	if !errors.Is(cause, ErrClosed) {
		m.log.Warn("communicator failed", "culprit_rank", culprit, "err", cause)
	}
	if notify {
		m.notifyAll(culprit, cause)
	}
	for _, fn := range hooks {
		fn()
	}
	close(m.settled)
}

// notifyAll sends a failure notice to every other rank, in parallel, and
// waits (bounded) for all but the culprit to acknowledge it.
func (m *Mesh) notifyAll(culprit int, cause error) {
	msg := cause.Error()
	var pe *PeerError
	if errors.As(cause, &pe) {
		msg = pe.Err.Error()
	}
	n := notice{culprit: uint32(culprit), code: codeOf(cause), msg: msg}
	deadline := time.Now().Add(min(m.cfg.NoticeTimeout, m.cfg.Timeout))
	if culprit != m.cfg.Rank {
		// A stalled culprit is still alive and should learn why the others
		// gave up on it; a dead one may not answer at all, so this notice
		// is not waited for here, and gets a shorter deadline (Close waits
		// for it).
		m.notices.Add(1)
		go func() {
			defer m.notices.Done()
			m.sendNotice(culprit, n, time.Now().Add(min(culpritNoticeTimeout, m.cfg.Timeout)))
		}()
	}
	var wg sync.WaitGroup
	for p := range m.cfg.WorldSize {
		if p == m.cfg.Rank || p == culprit {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.sendNotice(p, n, deadline); err != nil {
				m.log.Debug("failure notice not delivered", "rank", p, "err", err)
			}
		}()
	}
	wg.Wait()
}

func (m *Mesh) sendNotice(peer int, n notice, deadline time.Time) error {
	ctx, cancel := context.WithDeadline(m.base, deadline)
	defer cancel()
	c, err := m.dialHello(ctx, peer, kindNotice, deadline)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(deadline)
	if err := writeNotice(c, n); err != nil {
		return err
	}
	_, _, err = readStatus(c)
	return err
}
