package collective

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// The listener side of link hellos, and refusals that name a culprit.

// blamingPrefix starts the reason of a link refusal from a rank that has
// already failed: it names the rank that one blames and the kind of its
// failure, so the dialer blames the same rank (relayedRefusal) rather than
// the rank that refused it, which merely gave up first.
const blamingPrefix = "failed, blaming rank "

// handleLink answers a link hello that passed the checks, and reports
// whether the connection was handed to Streams (the caller must not close
// it then).
func (m *Mesh) handleLink(c *net.TCPConn, h hello, remote string) (keep bool) {
	from := int(h.from)
	// A peer may dial before this process has asked for its streams (it is
	// still between NewMesh and Streams): hold the hello.
	select {
	case <-m.streamsAsked:
	case <-m.base.Done():
		return false
	case <-time.After(m.cfg.HandshakeTimeout):
	}
	m.mu.Lock()
	est := m.establishing
	expected := containsInt(m.recvFrom, from)
	m.mu.Unlock()
	if !est || !expected {
		reason := fmt.Sprintf("rank %d does not expect a link from rank %d", m.cfg.Rank, from)
		if !est {
			reason = m.noMoreLinks()
		}
		writeStatus(c, statusRejected, reason)
		m.rejected(h, remote, reason, false)
		return false
	}
	if err := m.accept(c, h); err != nil {
		return false
	}
	c.SetDeadline(time.Time{})
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.establishing {
		return false
	}
	select {
	case m.arrivals <- inLink{from: from, conn: c}:
		return true
	default:
		return false
	}
}

// noMoreLinks is why a link hello is refused once this rank no longer
// connects. A rank whose setup is ending is about to record its failure:
// it waits for that, so that the refusal can name the rank it blames.
func (m *Mesh) noMoreLinks() string {
	m.mu.Lock()
	asked := m.arrivals != nil
	m.mu.Unlock()
	if asked {
		select {
		case <-m.setupEnded:
		case <-m.base.Done():
		}
	}
	if !m.isFailed() {
		return fmt.Sprintf("rank %d accepts no more links (it is connected, or did not ask for its links within %s)", m.cfg.Rank, m.cfg.HandshakeTimeout)
	}
	cause := m.cause // set before failed was closed
	return fmt.Sprintf("%s%d (failure code %d): rank %d has failed: %v", blamingPrefix, culpritOf(cause, m.cfg.Rank), codeOf(cause), m.cfg.Rank, cause)
}

// relayedRefusal turns a refusal by peer that starts with blamingPrefix
// into a failure blaming the rank peer blames, as a notice from peer
// would. A reason that does not parse blames peer.
func (m *Mesh) relayedRefusal(peer int, reason string) error {
	var culprit, code int
	_, err := fmt.Sscanf(strings.TrimPrefix(reason, blamingPrefix), "%d (failure code %d)", &culprit, &code)
	if err != nil || culprit < 0 || culprit >= m.cfg.WorldSize || code < 0 || code > 255 {
		return &PeerError{Rank: peer, Addr: m.Addr(peer), Err: fmt.Errorf("%w: %s", ErrHandshake, reason)}
	}
	return &PeerError{Rank: culprit, Addr: m.Addr(culprit),
		Err: &remoteError{reporter: peer, kind: failCode(code).sentinel(), msg: reason}}
}

// isRefusal reports whether err, from dialHello, is a final answer of the
// peer rather than a reason to dial again.
func isRefusal(err error) bool {
	var re *remoteError
	return errors.Is(err, ErrHandshake) || errors.As(err, &re)
}

// awaitOwnSetup is called before a notice blaming this rank for a refused
// handshake is recorded. The refusal of this rank's hello reached it over
// its own connection before the notice was sent (the listener answers
// first, then fails and tells everyone): while this rank is still
// connecting, it lets that answer, which names the peer, be its failure,
// so that it does not blame itself only because the notice was scheduled
// first.
func (m *Mesh) awaitOwnSetup() {
	m.mu.Lock()
	est := m.establishing
	m.mu.Unlock()
	if !est {
		return
	}
	select {
	case <-m.setupEnded:
	case <-m.base.Done():
	}
}
