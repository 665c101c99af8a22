package collective

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

const (
	// acceptHandshakeTimeout bounds how long an accepted connection may take
	// to send its hello; real peers send it at once.
	acceptHandshakeTimeout = 10 * time.Second
	// noticeTimeout bounds delivering one abort notice.
	noticeTimeout = 2 * time.Second
	// culpritNoticeTimeout bounds telling the rank blamed for a failure;
	// a live one answers from its accept loop at once.
	culpritNoticeTimeout = 500 * time.Millisecond
	// probeTimeout bounds asking a silent peer what it is blocked on. A
	// live process answers from its accept loop at once, even while its
	// operation waits; a stopped one does not answer at all.
	probeTimeout = time.Second
	// noticeGrace is how long a rank whose link just broke waits for an
	// abort notice before blaming the peer at the other end of that link.
	// The notice, when one comes, names the rank that really failed rather
	// than a neighbour that merely gave up because of it.
	noticeGrace = 250 * time.Millisecond
	// ioPiece bounds the bytes moved under one deadline, so that a large
	// Send or Recv that keeps making progress never times out.
	ioPiece = 4 << 20
	// maxDialBackoff caps the pause between connection attempts.
	maxDialBackoff = 500 * time.Millisecond
)

// aLongTimeAgo is a deadline that makes blocked I/O return at once.
var aLongTimeAgo = time.Unix(1, 0)

// tcpConfig configures a tcpTransport.
type tcpConfig struct {
	rank, world    int
	peers          []string
	listener       net.Listener // nil: bind peers[rank]
	jobID          string
	token          string // "": connections are not authenticated
	timeout        time.Duration
	connectTimeout time.Duration
	sockBuf        int
	sendTo         []int // ranks this rank dials and sends to
	recvFrom       []int // ranks expected to dial this rank
	log            *slog.Logger
}

// tcpTransport is the TCP Transport: one connection per directed link,
// dialled by the sender. The listener stays open for the transport's
// lifetime to receive abort notices from any rank.
type tcpTransport struct {
	cfg  tcpConfig
	ln   net.Listener
	auth *authenticator // nil without a peer token
	out  []*net.TCPConn // by peer rank; written during setup only
	in   []*net.TCPConn

	wg      sync.WaitGroup // the accept loop and connection handlers
	notices sync.WaitGroup // notices sent without waiting; Close waits

	mu           sync.Mutex
	closing      bool
	establishing bool
	handshakes   map[net.Conn]struct{}
	arrivals     chan inLink // accepted links, during establishment
	setupErr     chan error  // rejected links, during establishment
	// Unauthenticated links refused during establishment, by the rank
	// they claimed to come from. They do not fail the setup, since anyone
	// who can reach the port could send them; they explain a link that
	// never arrives.
	refused map[int]refusal

	// The peer (plus one; zero: none) of the Recv and Send calls in
	// flight, reported to probes.
	recvPeer, sendPeer atomic.Int32

	failMu  sync.Mutex
	cause   error         // set once, under failMu
	failed  chan struct{} // closed once cause is set
	settled chan struct{} // closed once peers have been told

	base       context.Context // for abort notices; cancelled by Close
	cancelBase context.CancelFunc

	closeOnce sync.Once
}

type inLink struct {
	from int
	conn *net.TCPConn
}

// refusal is a hello that failed authentication.
type refusal struct {
	remote, reason string
}

var _ Transport = (*tcpTransport)(nil)

// newTCPTransport connects this rank to its peers: it dials every rank in
// cfg.sendTo (retrying until cfg.connectTimeout, since peers start at
// different times) and waits for every rank in cfg.recvFrom to dial it.
func newTCPTransport(ctx context.Context, cfg tcpConfig) (*tcpTransport, error) {
	t := &tcpTransport{
		cfg:          cfg,
		ln:           cfg.listener,
		auth:         newAuthenticator(cfg.token),
		out:          make([]*net.TCPConn, cfg.world),
		in:           make([]*net.TCPConn, cfg.world),
		establishing: true,
		handshakes:   make(map[net.Conn]struct{}),
		arrivals:     make(chan inLink, 4*len(cfg.recvFrom)+1),
		setupErr:     make(chan error, 1),
		refused:      make(map[int]refusal),
		failed:       make(chan struct{}),
		settled:      make(chan struct{}),
	}
	t.base, t.cancelBase = context.WithCancel(context.WithoutCancel(ctx))
	if t.ln == nil {
		ln, err := net.Listen("tcp", cfg.peers[cfg.rank])
		if err != nil {
			t.cancelBase()
			return nil, fmt.Errorf("collective: listen on %s for rank %d: %w", cfg.peers[cfg.rank], cfg.rank, err)
		}
		t.ln = ln
	}
	t.wg.Add(1)
	go t.acceptLoop()

	if err := t.establish(ctx); err != nil {
		// Tell the others, so they fail now rather than at their own
		// connect timeout; best effort, they may not be listening yet.
		t.fail(err, culpritOf(err, cfg.rank), true)
		t.Close()
		return nil, err
	}
	for _, c := range t.links() {
		t.tune(c)
	}
	return t, nil
}

func (t *tcpTransport) establish(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.connectTimeout)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	for _, p := range t.cfg.sendTo {
		g.Go(func() error {
			c, err := t.dialLink(gctx, p)
			if err != nil {
				return err
			}
			t.mu.Lock()
			t.out[p] = c
			t.mu.Unlock()
			return nil
		})
	}
	g.Go(func() error { return t.awaitLinks(gctx) })
	err := g.Wait()

	t.mu.Lock()
	t.establishing = false
	// Links that arrived after the last one was counted, or after failure.
	for drained := false; !drained; {
		select {
		case l := <-t.arrivals:
			if t.in[l.from] != l.conn {
				l.conn.Close()
			}
		default:
			drained = true
		}
	}
	t.mu.Unlock()
	if err != nil {
		for _, c := range t.links() {
			c.Close()
		}
		return err
	}
	t.cfg.log.Debug("links established", "send_to", t.cfg.sendTo, "recv_from", t.cfg.recvFrom)
	return nil
}

// awaitLinks collects the connections dialled by the ranks in recvFrom.
func (t *tcpTransport) awaitLinks(ctx context.Context) error {
	missing := make(map[int]bool, len(t.cfg.recvFrom))
	for _, p := range t.cfg.recvFrom {
		missing[p] = true
	}
	for len(missing) > 0 {
		select {
		case l := <-t.arrivals:
			t.mu.Lock()
			if old := t.in[l.from]; old != nil {
				// The peer redialled (its first attempt timed out on its side);
				// the newest connection is the one it uses.
				old.Close()
			}
			t.in[l.from] = l.conn
			t.mu.Unlock()
			delete(missing, l.from)
		case err := <-t.setupErr:
			return err
		case <-t.failed:
			return t.cause
		case <-ctx.Done():
			ranks := make([]int, 0, len(missing))
			for p := range missing {
				ranks = append(ranks, p)
			}
			sort.Ints(ranks)
			for _, p := range ranks {
				if err := t.refusedErr(ctx, p); err != nil {
					return err
				}
			}
			p := ranks[0]
			return &PeerError{Rank: p, Addr: t.cfg.peers[p], Err: fmt.Errorf("%w: no connection from this rank%s",
				ErrPeerLost, t.gaveUp(ctx))}
		}
	}
	return nil
}

// refusedErr explains, when connecting gave up, why no link from peer
// arrived: a connection claiming to come from it failed authentication.
// It returns nil when there was none.
func (t *tcpTransport) refusedErr(ctx context.Context, peer int) error {
	t.mu.Lock()
	r, ok := t.refused[peer]
	t.mu.Unlock()
	if !ok {
		return nil
	}
	return &PeerError{Rank: peer, Addr: t.cfg.peers[peer], Err: fmt.Errorf("%w: no authenticated connection from this rank%s; a connection from %s claiming to be it was refused: %s",
		ErrHandshake, t.gaveUp(ctx), r.remote, r.reason)}
}

// gaveUp says why connecting stopped, for an error message: the connect
// timeout, or the caller's cancellation.
func (t *tcpTransport) gaveUp(ctx context.Context) string {
	cause := context.Cause(ctx)
	if errors.Is(cause, context.DeadlineExceeded) {
		return fmt.Sprintf(" within the connect timeout of %s", t.cfg.connectTimeout)
	}
	return fmt.Sprintf(": %v", cause)
}

// dialLink connects to peer's listener, retrying while the peer is not up
// yet. A handshake rejection is final.
func (t *tcpTransport) dialLink(ctx context.Context, peer int) (*net.TCPConn, error) {
	backoff := 20 * time.Millisecond
	for {
		c, err := t.dialHello(ctx, peer, kindLink, time.Time{})
		if err == nil {
			return c, nil
		}
		if errors.Is(err, ErrHandshake) {
			return nil, err
		}
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			if t.isFailed() {
				return nil, t.cause
			}
			// A peer that was refused, then exited, is not reachable; the
			// refusal is the better explanation.
			if err := t.refusedErr(ctx, peer); err != nil {
				return nil, err
			}
			return nil, &PeerError{Rank: peer, Addr: t.cfg.peers[peer], Err: fmt.Errorf("%w: connect: not reachable%s (last attempt: %v)",
				ErrPeerLost, t.gaveUp(ctx), err)}
		case <-timer.C:
		}
		backoff = min(2*backoff, maxDialBackoff)
	}
}

// dialHello opens a connection to peer and completes the handshake for a
// connection of the given kind. A zero deadline means ctx's.
func (t *tcpTransport) dialHello(ctx context.Context, peer int, kind uint8, deadline time.Time) (*net.TCPConn, error) {
	addr := t.cfg.peers[peer]
	d := net.Dialer{Deadline: deadline}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := nc.(*net.TCPConn)
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(aLongTimeAgo) })
	defer stop()
	if dl, ok := ctx.Deadline(); ok && (deadline.IsZero() || dl.Before(deadline)) {
		deadline = dl
	}
	c.SetDeadline(deadline)
	h := hello{
		version: protoVersion,
		kind:    kind,
		order:   byteOrderMark,
		from:    uint32(t.cfg.rank),
		to:      uint32(peer),
		world:   uint32(t.cfg.world),
		jobID:   t.cfg.jobID,
	}
	if t.auth != nil {
		err = t.auth.sign(&h, time.Now())
	}
	if err == nil {
		err = writeHello(c, h)
	}
	var status uint8
	var reason string
	if err == nil {
		status, reason, err = readStatus(c)
	}
	if err == nil && status != 0 {
		err = &PeerError{Rank: peer, Addr: addr, Err: fmt.Errorf("%w: %s", ErrHandshake, reason)}
	}
	if err == nil && t.auth != nil {
		var ok bool
		if ok, err = t.auth.readReplyMAC(c, h); err == nil && !ok {
			err = &PeerError{Rank: peer, Addr: addr, Err: fmt.Errorf("%w: the reply does not prove the job's peer token: the process listening there is not a rank of this job", ErrHandshake)}
		}
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

func (t *tcpTransport) acceptLoop() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if t.base.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors or similar: keep the listener alive,
			// abort notices depend on it.
			t.cfg.log.Warn("accepting a peer connection failed", "addr", t.ln.Addr().String(), "err", err)
			timer := time.NewTimer(50 * time.Millisecond)
			select {
			case <-t.base.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
			continue
		}
		t.wg.Add(1)
		go t.handle(c.(*net.TCPConn))
	}
}

// handle runs the listener side of one handshake.
func (t *tcpTransport) handle(c *net.TCPConn) {
	defer t.wg.Done()
	t.mu.Lock()
	if t.closing {
		t.mu.Unlock()
		c.Close()
		return
	}
	t.handshakes[c] = struct{}{}
	t.mu.Unlock()
	keep := false
	defer func() {
		t.mu.Lock()
		delete(t.handshakes, c)
		t.mu.Unlock()
		if !keep {
			c.Close()
		}
	}()

	remote := c.RemoteAddr().String()
	c.SetDeadline(time.Now().Add(acceptHandshakeTimeout))
	h, err := readHello(c)
	if err != nil {
		t.cfg.log.Debug("ignoring connection", "remote", remote, "err", err)
		return
	}
	if reason, unauthenticated := t.checkHello(h); reason != "" {
		writeStatus(c, 1, reason)
		t.rejected(h, remote, reason, unauthenticated)
		return
	}
	from := int(h.from)
	switch h.kind {
	case kindLink:
		t.mu.Lock()
		est := t.establishing
		t.mu.Unlock()
		if !est || !containsInt(t.cfg.recvFrom, from) {
			reason := fmt.Sprintf("rank %d does not expect a link from rank %d", t.cfg.rank, from)
			if !est {
				// Connected, or gave up connecting and is about to say why.
				reason = fmt.Sprintf("rank %d accepts no more links (it is connected, or it gave up connecting)", t.cfg.rank)
			}
			writeStatus(c, 1, reason)
			t.rejected(h, remote, reason, false)
			return
		}
		if err := t.accept(c, h); err != nil {
			return
		}
		c.SetDeadline(time.Time{})
		t.mu.Lock()
		if t.establishing {
			select {
			case t.arrivals <- inLink{from: from, conn: c}:
				keep = true
			default:
			}
		}
		t.mu.Unlock()
	case kindNotice:
		if t.accept(c, h) != nil {
			return
		}
		n, err := readNotice(c)
		if err != nil {
			return
		}
		t.onNotice(from, n)
		writeStatus(c, 0, "")
	case kindProbe:
		if t.accept(c, h) == nil {
			writeProbeAnswer(c, probeAnswer{
				recvFrom: int(t.recvPeer.Load()) - 1,
				sendTo:   int(t.sendPeer.Load()) - 1,
			})
		}
	default:
		writeStatus(c, 1, fmt.Sprintf("unknown connection kind %d", h.kind))
	}
}

// accept answers h with an accepting reply, which proves this rank's peer
// token when h proved the dialer's.
func (t *tcpTransport) accept(c net.Conn, h hello) error {
	if err := writeStatus(c, 0, ""); err != nil {
		return err
	}
	if t.auth != nil {
		return t.auth.writeReplyMAC(c, h)
	}
	return nil
}

// checkHello returns why h must be rejected, or "", and whether the reason
// is that h is not authenticated. Authentication comes before the other
// checks, so a stranger learns nothing about the job.
func (t *tcpTransport) checkHello(h hello) (reason string, unauthenticated bool) {
	if h.version != protoVersion {
		return fmt.Sprintf("protocol version %d, but rank %d speaks version %d", h.version, t.cfg.rank, protoVersion), t.auth != nil
	}
	if t.auth != nil {
		if reason := t.auth.verify(h, t.cfg.rank, time.Now()); reason != "" {
			return reason, true
		}
	} else if h.proof != nil {
		return fmt.Sprintf("the hello carries a peer-token proof, but rank %d has no peer token (set %s for every rank or for none)", t.cfg.rank, EnvPeerToken), false
	}
	switch {
	case h.order != byteOrderMark:
		return fmt.Sprintf("rank %d has a different byte order", t.cfg.rank), false
	case h.jobID != t.cfg.jobID:
		return fmt.Sprintf("job id %q, but rank %d belongs to job %q", h.jobID, t.cfg.rank, t.cfg.jobID), false
	case int(h.world) != t.cfg.world:
		return fmt.Sprintf("world size %d, but rank %d has world size %d", h.world, t.cfg.rank, t.cfg.world), false
	case int(h.to) != t.cfg.rank:
		return fmt.Sprintf("addressed to rank %d, but this is rank %d (check the order of the peer addresses)", h.to, t.cfg.rank), false
	case int(h.from) >= t.cfg.world || int(h.from) == t.cfg.rank:
		return fmt.Sprintf("sender claims to be rank %d", h.from), false
	}
	return "", false
}

// rejected makes a link rejected while connecting fail this rank's setup
// too, naming the peer: both sides of a misconfiguration report it. An
// unauthenticated link is only remembered, since anyone could send it;
// the setup fails when the real link does not come.
func (t *tcpTransport) rejected(h hello, remote, reason string, unauthenticated bool) {
	t.cfg.log.Warn("rejected peer connection", "remote", remote, "claimed_rank", h.from, "reason", reason)
	if h.kind != kindLink {
		return
	}
	t.mu.Lock()
	est := t.establishing
	if est && unauthenticated && int(h.from) < t.cfg.world {
		t.refused[int(h.from)] = refusal{remote: remote, reason: reason}
	}
	t.mu.Unlock()
	if !est || unauthenticated {
		return
	}
	var err error
	if int(h.from) < t.cfg.world {
		err = &PeerError{Rank: int(h.from), Addr: t.cfg.peers[h.from], Err: fmt.Errorf("%w: connection from %s: %s", ErrHandshake, remote, reason)}
	} else {
		err = fmt.Errorf("%w: connection from %s: %s", ErrHandshake, remote, reason)
	}
	select {
	case t.setupErr <- err:
	default:
	}
}

// onNotice records a failure reported by rank from.
func (t *tcpTransport) onNotice(from int, n notice) {
	culprit := int(n.culprit)
	if culprit >= t.cfg.world {
		culprit = from
	}
	t.cfg.log.Debug("abort notice", "from", from, "culprit", culprit, "msg", n.msg)
	t.settle(&PeerError{
		Rank: culprit,
		Addr: t.cfg.peers[culprit],
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

// Send implements Transport.
func (t *tcpTransport) Send(ctx context.Context, peer int, p []byte) error {
	c, err := t.link(t.out, peer, "send to")
	if err != nil {
		return err
	}
	return t.transfer(ctx, c, peer, p, true)
}

// Recv implements Transport.
func (t *tcpTransport) Recv(ctx context.Context, peer int, p []byte) error {
	c, err := t.link(t.in, peer, "receive from")
	if err != nil {
		return err
	}
	return t.transfer(ctx, c, peer, p, false)
}

func (t *tcpTransport) link(links []*net.TCPConn, peer int, verb string) (*net.TCPConn, error) {
	if peer < 0 || peer >= len(links) || links[peer] == nil {
		return nil, fmt.Errorf("collective: rank %d has no link to %s rank %d", t.cfg.rank, verb, peer)
	}
	return links[peer], nil
}

// transfer moves p over c in pieces, each under a fresh deadline, so the
// timeout measures lack of progress rather than total time.
func (t *tcpTransport) transfer(ctx context.Context, c *net.TCPConn, peer int, p []byte, write bool) error {
	if t.isFailed() {
		<-t.settled
		return t.cause
	}
	if write {
		t.sendPeer.Store(int32(peer + 1))
		defer t.sendPeer.Store(0)
	} else {
		t.recvPeer.Store(int32(peer + 1))
		defer t.recvPeer.Store(0)
	}
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { c.SetDeadline(aLongTimeAgo) })
	}
	var err error
	for len(p) > 0 && err == nil {
		n := min(len(p), ioPiece)
		dl := time.Now().Add(t.cfg.timeout)
		if write {
			err = c.SetWriteDeadline(dl)
		} else {
			err = c.SetReadDeadline(dl)
		}
		// Re-check after arming the deadline: a cancellation or failure that
		// cleared it just before must not be lost.
		if err == nil && (ctx.Err() != nil || t.isFailed()) {
			err = errInterrupted
		}
		if err == nil {
			if write {
				_, err = c.Write(p[:n])
			} else {
				_, err = io.ReadFull(c, p[:n])
			}
		}
		p = p[n:]
	}
	if stop != nil && !stop() && ctx.Err() != nil {
		// The cancellation fired and may have cleared the deadline: this
		// link can no longer be trusted even if the I/O finished.
		err = ctx.Err()
	}
	if err == nil {
		return nil
	}
	return t.linkFailed(ctx, peer, err, write)
}

var errInterrupted = errors.New("interrupted")

// linkFailed turns an I/O error on the link with peer into the transport's
// sticky failure and returns it.
func (t *tcpTransport) linkFailed(ctx context.Context, peer int, ioErr error, write bool) error {
	if t.isFailed() {
		<-t.settled
		return t.cause
	}
	if ctx.Err() != nil {
		t.fail(fmt.Errorf("%w: rank %d: %w", ErrAborted, t.cfg.rank, context.Cause(ctx)), t.cfg.rank, true)
		return t.cause
	}
	// Give the rank that really failed a moment to tell us about it.
	timer := time.NewTimer(noticeGrace)
	select {
	case <-t.failed:
		timer.Stop()
		<-t.settled
		return t.cause
	case <-timer.C:
	}
	verb := "receive"
	if write {
		verb = "send"
	}
	var kind error = ErrPeerLost
	detail := ""
	var ne net.Error
	if errors.As(ioErr, &ne) && ne.Timeout() {
		kind = ErrPeerTimeout
		var victim bool
		detail, victim = t.diagnose(peer)
		if victim {
			// The peer is alive and itself waiting on another rank: whoever
			// is next to the rank that really stalled will name it. Wait for
			// that notice, but not forever.
			t.cfg.log.Debug("peer is waiting on another rank", "peer", peer, "state", detail)
			timer := time.NewTimer(t.cfg.timeout)
			select {
			case <-t.failed:
				timer.Stop()
				<-t.settled
				return t.cause
			case <-timer.C:
			}
		}
	}
	t.fail(&PeerError{Rank: peer, Addr: t.cfg.peers[peer], Err: fmt.Errorf("%w: %s: %w%s", kind, verb, ioErr, detail)}, peer, true)
	return t.cause
}

// diagnose asks peer, which made no progress for the timeout, what it is
// blocked on. It returns a description for the error message, and whether
// the peer is a victim: alive and blocked on a rank other than this one.
func (t *tcpTransport) diagnose(peer int) (detail string, victim bool) {
	a, err := t.probe(peer)
	switch {
	case err != nil:
		return fmt.Sprintf(" (no progress for %s; the peer does not answer: %v)", t.cfg.timeout, err), false
	case a.recvFrom >= 0 && a.recvFrom != t.cfg.rank:
		return fmt.Sprintf(" (no progress for %s; the peer is waiting to receive from rank %d)", t.cfg.timeout, a.recvFrom), true
	case a.sendTo >= 0 && a.sendTo != t.cfg.rank:
		return fmt.Sprintf(" (no progress for %s; the peer is waiting to send to rank %d)", t.cfg.timeout, a.sendTo), true
	case a.recvFrom < 0 && a.sendTo < 0:
		return fmt.Sprintf(" (no progress for %s; the peer is alive but not in a collective operation)", t.cfg.timeout), false
	default:
		return fmt.Sprintf(" (no progress for %s)", t.cfg.timeout), false
	}
}

// probe asks peer which ranks it is blocked on.
func (t *tcpTransport) probe(peer int) (probeAnswer, error) {
	deadline := time.Now().Add(min(probeTimeout, t.cfg.timeout))
	ctx, cancel := context.WithDeadline(t.base, deadline)
	defer cancel()
	c, err := t.dialHello(ctx, peer, kindProbe, deadline)
	if err != nil {
		return probeAnswer{}, err
	}
	defer c.Close()
	c.SetDeadline(deadline)
	return readProbeAnswer(c)
}

func (t *tcpTransport) isFailed() bool {
	select {
	case <-t.failed:
		return true
	default:
		return false
	}
}

// fail makes cause the transport's sticky error (the first caller wins),
// tells every other rank when notify is set, and then interrupts pending
// I/O. Links are not closed here, so neighbours do not see an end of
// stream that they would blame on this rank: they hear the notice instead.
// fail returns once the failure is settled, whoever recorded it.
func (t *tcpTransport) fail(cause error, culprit int, notify bool) {
	t.settle(cause, culprit, notify, true)
}

// settle is fail; with wait unset it does not wait for a failure that
// another goroutine is settling. Notice handlers use that: two ranks that
// fail at the same moment each wait for the other to acknowledge its
// notice, and must not wait for their own settling to do so.
func (t *tcpTransport) settle(cause error, culprit int, notify, wait bool) {
	t.failMu.Lock()
	first := t.cause == nil
	if first {
		t.cause = cause
		close(t.failed)
	}
	t.failMu.Unlock()
	if !first {
		if wait {
			<-t.settled
		}
		return
	}
	if !errors.Is(cause, ErrClosed) {
		t.cfg.log.Warn("communicator failed", "culprit_rank", culprit, "err", cause)
	}
	if notify {
		t.notifyAll(culprit, cause)
	}
	for _, c := range t.links() {
		c.SetDeadline(aLongTimeAgo)
	}
	close(t.settled)
}

// notifyAll sends an abort notice to every other rank, in parallel, and
// waits (bounded) for all but the culprit to acknowledge it.
func (t *tcpTransport) notifyAll(culprit int, cause error) {
	msg := cause.Error()
	var pe *PeerError
	if errors.As(cause, &pe) {
		msg = pe.Err.Error()
	}
	n := notice{culprit: uint32(culprit), code: codeOf(cause), msg: msg}
	deadline := time.Now().Add(min(noticeTimeout, t.cfg.timeout))
	if culprit != t.cfg.rank {
		// A stalled culprit is still alive and should learn why the others
		// gave up on it; a dead one may not answer at all, so this notice
		// is not waited for here, and gets a shorter deadline (Close waits
		// for it).
		t.notices.Add(1)
		go func() {
			defer t.notices.Done()
			t.sendNotice(culprit, n, time.Now().Add(min(culpritNoticeTimeout, t.cfg.timeout)))
		}()
	}
	var wg sync.WaitGroup
	for p := range t.cfg.world {
		if p == t.cfg.rank || p == culprit {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := t.sendNotice(p, n, deadline); err != nil {
				t.cfg.log.Debug("abort notice not delivered", "rank", p, "err", err)
			}
		}()
	}
	wg.Wait()
}

func (t *tcpTransport) sendNotice(peer int, n notice, deadline time.Time) error {
	ctx, cancel := context.WithDeadline(t.base, deadline)
	defer cancel()
	c, err := t.dialHello(ctx, peer, kindNotice, deadline)
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

// Abort implements Transport.
func (t *tcpTransport) Abort(cause error) {
	t.fail(fmt.Errorf("%w: rank %d: %w", ErrAborted, t.cfg.rank, cause), t.cfg.rank, true)
}

// Close implements Transport.
func (t *tcpTransport) Close() error {
	t.closeOnce.Do(func() {
		t.fail(fmt.Errorf("%w: rank %d", ErrClosed, t.cfg.rank), t.cfg.rank, false)
		t.notices.Wait() // bounded by noticeTimeout
		t.mu.Lock()
		t.closing = true
		for c := range t.handshakes {
			c.Close()
		}
		t.mu.Unlock()
		t.cancelBase()
		t.ln.Close()
		for _, c := range t.links() {
			c.Close()
		}
		t.wg.Wait()
	})
	return nil
}

// links returns the established connections.
func (t *tcpTransport) links() []*net.TCPConn {
	t.mu.Lock()
	defer t.mu.Unlock()
	var cs []*net.TCPConn
	for _, set := range [][]*net.TCPConn{t.out, t.in} {
		for _, c := range set {
			if c != nil {
				cs = append(cs, c)
			}
		}
	}
	return cs
}

// tune sets the options that matter for bulk transfer on an established
// link.
func (t *tcpTransport) tune(c *net.TCPConn) {
	c.SetNoDelay(true)
	if t.cfg.sockBuf > 0 {
		c.SetReadBuffer(t.cfg.sockBuf)
		c.SetWriteBuffer(t.cfg.sockBuf)
	}
}

// culpritOf returns the rank err blames, or def.
func culpritOf(err error, def int) int {
	var pe *PeerError
	if errors.As(err, &pe) {
		return pe.Rank
	}
	return def
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
