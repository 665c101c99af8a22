package collective

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

const (
	// maxDialBackoff caps the pause between connection attempts.
	maxDialBackoff = 500 * time.Millisecond
)

// errNotYet is a handshake the peer asked to retry: it has not heard of a
// replacement the dialer knows of (see checkIncarnations).
var errNotYet = errors.New("peer not ready for this membership")

// errConnectTimeout ends a setup that reached MeshConfig.ConnectTimeout,
// so that an error message tells it from the caller's own deadline.
var errConnectTimeout = fmt.Errorf("collective: connect timeout: %w", context.DeadlineExceeded)

// aLongTimeAgo is a deadline that makes blocked I/O return at once.
var aLongTimeAgo = time.Unix(1, 0)

// MeshConfig describes one member of a peer mesh.
type MeshConfig struct {
	// Rank is this process's rank, in [0, WorldSize).
	Rank int
	// WorldSize is the number of members.
	WorldSize int
	// Peers holds every member's mesh address (host:port) in rank order.
	Peers []string
	// Incarnations holds every member's incarnation in rank order (see
	// Config.Incarnations); nil means zero for every member.
	Incarnations []uint32
	// Listener, when set, is an already-bound listener on Peers[Rank]; the
	// mesh owns it from NewMesh on. When nil, the mesh binds Peers[Rank].
	Listener net.Listener
	// JobID is checked in every hello.
	JobID string
	// Token authenticates every connection (see Config.Token); empty
	// checks the job id only.
	Token string
	// Timeout is how long a peer may make no progress before it is blamed,
	// and bounds the wait for a notice that names a rank further away.
	Timeout time.Duration
	// ConnectTimeout bounds Streams: how long to wait for peers to start.
	ConnectTimeout time.Duration
	// HandshakeTimeout bounds how long an accepted connection may take to
	// send its hello (zero: DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration
	// NoticeTimeout bounds delivering one failure notice, ProbeTimeout
	// asking a silent peer what it is blocked on; both at most Timeout
	// (zero: DefaultNoticeTimeout, DefaultProbeTimeout).
	NoticeTimeout, ProbeTimeout time.Duration
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
}

// Mesh is one member of an authenticated peer mesh: the part of a
// communicator that owns membership and failure, whatever carries the
// data. It listens on the member's peer port for hellos (see wire.go),
// which it checks (protocol version, job id, world size, ranks and, with a
// token, an HMAC proof with replay protection); it hands out authenticated
// byte streams between members (Streams), which data links adopt or
// bootstrap from; and it turns the first failure anywhere into one sticky
// error that every member agrees on: the member that detects a failure
// tells every other one over a short notice connection, naming the rank it
// blames, and asks a silent peer what it is blocked on (a probe) before
// blaming it, so a rank that merely waits on the real culprit is not
// blamed instead.
//
// A communicator builds one Mesh per rank; a parameter server or any other
// service of the job can build its own on its own port to share the job's
// authentication and failure notices (see the package documentation).
type Mesh struct {
	cfg  MeshConfig
	ln   net.Listener
	auth *authenticator // nil without a peer token
	log  *slog.Logger

	wg      sync.WaitGroup // the accept loop and connection handlers
	notices sync.WaitGroup // notices sent without waiting; Close waits

	mu           sync.Mutex
	closing      bool
	establishing bool
	handshakes   map[net.Conn]struct{}
	streamsAsked chan struct{} // closed when Streams is first called, or by Close
	// setupEnded is closed when Streams returns: connected, or failed with
	// the failure recorded.
	setupEnded chan struct{}
	arrivals   chan inLink // accepted streams, while Streams runs
	setupErr   chan error  // rejected streams, while Streams runs
	recvFrom   []int       // ranks Streams expects streams from
	// Unauthenticated streams refused while Streams runs, by the rank they
	// claimed to come from. They do not fail the setup, since anyone who
	// can reach the port could send them; they explain a stream that never
	// arrives.
	refused map[int]refusal

	// The peer (plus one; zero: none) of the receive and send in flight,
	// reported to probes.
	recvPeer, sendPeer atomic.Int32

	failMu  sync.Mutex
	cause   error         // set once, under failMu
	failed  chan struct{} // closed once cause is set
	settled chan struct{} // closed once peers have been told
	// onFail is called once the failure is recorded, before peers are
	// told; a data link's Interrupt.
	onFail []func()

	base       context.Context // for notices and probes; cancelled by Close
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

// NewMesh starts a member of a peer mesh: it listens on cfg.Peers[cfg.Rank]
// (or cfg.Listener) and answers notices and probes until Close. It does not
// wait for the other members; Streams does. NewMesh owns cfg.Listener from
// the start and closes it on error.
func NewMesh(cfg MeshConfig) (*Mesh, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.NoticeTimeout <= 0 {
		cfg.NoticeTimeout = DefaultNoticeTimeout
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = DefaultProbeTimeout
	}
	fail := func(err error) (*Mesh, error) {
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return nil, err
	}
	switch {
	case cfg.WorldSize < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.WorldSize:
		return fail(fmt.Errorf("collective: mesh rank %d of world size %d: out of range", cfg.Rank, cfg.WorldSize))
	case len(cfg.Peers) != cfg.WorldSize:
		return fail(fmt.Errorf("collective: %d mesh addresses for world size %d: need one per rank", len(cfg.Peers), cfg.WorldSize))
	case cfg.Incarnations != nil && len(cfg.Incarnations) != cfg.WorldSize:
		return fail(fmt.Errorf("collective: %d mesh incarnations for world size %d: need one per rank", len(cfg.Incarnations), cfg.WorldSize))
	case cfg.Token != "" && len(cfg.Token) < minTokenLen:
		return fail(fmt.Errorf("collective: peer token is %d bytes long: need at least %d", len(cfg.Token), minTokenLen))
	}
	m := &Mesh{
		cfg:          cfg,
		ln:           cfg.Listener,
		auth:         newAuthenticator(cfg.Token),
		log:          cfg.Logger,
		handshakes:   make(map[net.Conn]struct{}),
		streamsAsked: make(chan struct{}),
		setupEnded:   make(chan struct{}),
		setupErr:     make(chan error, 1),
		refused:      make(map[int]refusal),
		failed:       make(chan struct{}),
		settled:      make(chan struct{}),
	}
	m.base, m.cancelBase = context.WithCancel(context.Background())
	if m.ln == nil {
		ln, err := net.Listen("tcp", cfg.Peers[cfg.Rank])
		if err != nil {
			m.cancelBase()
			return nil, fmt.Errorf("collective: listen on %s for rank %d: %w", cfg.Peers[cfg.Rank], cfg.Rank, err)
		}
		m.ln = ln
	}
	m.wg.Add(1)
	go m.acceptLoop()
	return m, nil
}

// Rank returns this member's rank.
func (m *Mesh) Rank() int { return m.cfg.Rank }

// WorldSize returns the number of members.
func (m *Mesh) WorldSize() int { return m.cfg.WorldSize }

// Addr returns rank's mesh address, for messages.
func (m *Mesh) Addr(rank int) string {
	if rank >= 0 && rank < len(m.cfg.Peers) {
		return m.cfg.Peers[rank]
	}
	return ""
}

// incarnation returns rank's incarnation as this member knows it.
func (m *Mesh) incarnation(rank int) uint32 {
	if rank >= 0 && rank < len(m.cfg.Incarnations) {
		return m.cfg.Incarnations[rank]
	}
	return 0
}

// epoch numbers this member's membership: the sum of the incarnations,
// which grows with every replacement.
func (m *Mesh) epoch() uint32 { return epochOf(m.cfg.Incarnations) }

// Timeout returns how long a peer may make no progress before it is
// blamed; data links use it as their progress timeout.
func (m *Mesh) Timeout() time.Duration { return m.cfg.Timeout }

// Streams connects this member to its peers with authenticated byte
// streams: it dials every rank in sendTo (retrying until the connect
// timeout, since peers start at different times) and waits for every rank
// in recvFrom to dial it. out[p] and in[p] are the streams to and from rank
// p (nil for other ranks); the caller owns them. A failure names the rank
// at fault and is also the mesh's failure, told to the other members.
// Streams may be called once per mesh.
func (m *Mesh) Streams(ctx context.Context, sendTo, recvFrom []int) (out, in []*net.TCPConn, err error) {
	m.mu.Lock()
	if m.arrivals != nil || m.closing {
		// Asked twice, or closed.
		m.mu.Unlock()
		return nil, nil, fmt.Errorf("collective: rank %d: mesh streams requested twice or after close", m.cfg.Rank)
	}
	m.establishing = true
	m.recvFrom = recvFrom
	m.arrivals = make(chan inLink, 4*len(recvFrom)+1)
	close(m.streamsAsked)
	m.mu.Unlock()
	// Closed after the failure is recorded: a link hello that arrives
	// meanwhile is refused naming the rank this one blames (refuseLink).
	defer close(m.setupEnded)
	out = make([]*net.TCPConn, m.cfg.WorldSize)
	in = make([]*net.TCPConn, m.cfg.WorldSize)
	if err := m.establish(ctx, sendTo, out, in); err != nil {
		// Tell the others, so they fail now rather than at their own
		// connect timeout; best effort, they may not be listening yet.
		m.fail(err, culpritOf(err, m.cfg.Rank), true)
		return nil, nil, err
	}
	m.log.Debug("streams established", "send_to", sendTo, "recv_from", recvFrom)
	return out, in, nil
}

func (m *Mesh) establish(ctx context.Context, sendTo []int, out, in []*net.TCPConn) error {
	ctx, cancel := context.WithTimeoutCause(ctx, m.cfg.ConnectTimeout, errConnectTimeout)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	for _, p := range sendTo {
		g.Go(func() error {
			c, err := m.dialStream(gctx, p)
			if err != nil {
				return err
			}
			m.mu.Lock()
			out[p] = c
			m.mu.Unlock()
			return nil
		})
	}
	g.Go(func() error { return m.awaitStreams(gctx, in) })
	err := g.Wait()

	m.mu.Lock()
	m.establishing = false
	// Streams that arrived after the last one was counted, or after failure.
	for drained := false; !drained; {
		select {
		case l := <-m.arrivals:
			if in[l.from] != l.conn {
				l.conn.Close()
			}
		default:
			drained = true
		}
	}
	m.mu.Unlock()
	if err != nil {
		for _, set := range [][]*net.TCPConn{out, in} {
			for _, c := range set {
				if c != nil {
					c.Close()
				}
			}
		}
	}
	return err
}

// awaitStreams collects the streams dialled by the ranks in recvFrom.
func (m *Mesh) awaitStreams(ctx context.Context, in []*net.TCPConn) error {
	missing := make(map[int]bool, len(m.recvFrom))
	for _, p := range m.recvFrom {
		missing[p] = true
	}
	for len(missing) > 0 {
		select {
		case l := <-m.arrivals:
			m.mu.Lock()
			if old := in[l.from]; old != nil {
				// The peer redialled (its first attempt timed out on its side);
				// the newest connection is the one it uses.
				old.Close()
			}
			in[l.from] = l.conn
			m.mu.Unlock()
			delete(missing, l.from)
		case err := <-m.setupErr:
			return err
		case <-m.failed:
			return m.cause
		case <-ctx.Done():
			ranks := make([]int, 0, len(missing))
			for p := range missing {
				ranks = append(ranks, p)
			}
			sort.Ints(ranks)
			for _, p := range ranks {
				if err := m.refusedErr(ctx, p); err != nil {
					return err
				}
			}
			p := ranks[0]
			return &PeerError{Rank: p, Addr: m.Addr(p), Err: fmt.Errorf("%w: no connection from this rank%s",
				ErrPeerLost, m.gaveUp(ctx))}
		}
	}
	return nil
}

// refusedErr explains, when connecting gave up, why no stream from peer
// arrived: a connection claiming to come from it failed authentication.
// It returns nil when there was none.
func (m *Mesh) refusedErr(ctx context.Context, peer int) error {
	m.mu.Lock()
	r, ok := m.refused[peer]
	m.mu.Unlock()
	if !ok {
		return nil
	}
	return &PeerError{Rank: peer, Addr: m.Addr(peer), Err: fmt.Errorf("%w: no authenticated connection from this rank%s; a connection from %s claiming to be it was refused: %s",
		ErrHandshake, m.gaveUp(ctx), r.remote, r.reason)}
}

// gaveUp says why connecting stopped, for an error message: the connect
// timeout, the caller's deadline (which may come first), or the caller's
// cancellation.
func (m *Mesh) gaveUp(ctx context.Context) string {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errConnectTimeout):
		return fmt.Sprintf(" within the connect timeout of %s", m.cfg.ConnectTimeout)
	case errors.Is(cause, context.DeadlineExceeded):
		return fmt.Sprintf(" before the caller's deadline, which came before the connect timeout of %s", m.cfg.ConnectTimeout)
	default:
		return fmt.Sprintf(": %v", cause)
	}
}

// dialStream connects to peer's listener, retrying while the peer is not
// up yet. A handshake rejection is final.
func (m *Mesh) dialStream(ctx context.Context, peer int) (*net.TCPConn, error) {
	backoff := 20 * time.Millisecond
	for {
		c, err := m.dialHello(ctx, peer, kindLink, time.Time{})
		if err == nil {
			return c, nil
		}
		if isRefusal(err) {
			return nil, err
		}
		// errNotYet too is retried: the peer has not heard of a
		// replacement yet and will rejoin.
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			if m.isFailed() {
				return nil, m.cause
			}
			// A peer that was refused, then exited, is not reachable; the
			// refusal is the better explanation.
			if err := m.refusedErr(ctx, peer); err != nil {
				return nil, err
			}
			return nil, &PeerError{Rank: peer, Addr: m.Addr(peer), Err: fmt.Errorf("%w: connect: not reachable%s (last attempt: %v)",
				ErrPeerLost, m.gaveUp(ctx), err)}
		case <-timer.C:
		}
		backoff = min(2*backoff, maxDialBackoff)
	}
}

// dialHello opens a connection to peer and completes the handshake for a
// connection of the given kind. A zero deadline means ctx's.
func (m *Mesh) dialHello(ctx context.Context, peer int, kind uint8, deadline time.Time) (*net.TCPConn, error) {
	addr := m.cfg.Peers[peer]
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
		from:    uint32(m.cfg.Rank),
		to:      uint32(peer),
		world:   uint32(m.cfg.WorldSize),
		fromInc: m.incarnation(m.cfg.Rank),
		toInc:   m.incarnation(peer),
		epoch:   m.epoch(),
		jobID:   m.cfg.JobID,
	}
	if m.auth != nil {
		err = m.auth.sign(&h, time.Now())
	}
	if err == nil {
		err = writeHello(c, h)
	}
	var status uint8
	var reason string
	if err == nil {
		status, reason, err = readStatus(c)
	}
	switch {
	case err != nil || status == statusAccepted:
	case status == statusNotYet:
		err = fmt.Errorf("%w: %s", errNotYet, reason)
	case strings.HasPrefix(reason, replacedPrefix):
		err = &PeerError{Rank: peer, Addr: addr, Err: fmt.Errorf("%w: %s", ErrReplaced, reason)}
	case strings.HasPrefix(reason, blamingPrefix):
		err = m.relayedRefusal(peer, reason)
	default:
		err = &PeerError{Rank: peer, Addr: addr, Err: fmt.Errorf("%w: %s", ErrHandshake, reason)}
	}
	if err == nil && m.auth != nil {
		var ok bool
		if ok, err = m.auth.readReplyMAC(c, h); err == nil && !ok {
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

func (m *Mesh) acceptLoop() {
	defer m.wg.Done()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			if m.base.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors or similar: keep the listener alive,
			// notices depend on it.
			m.log.Warn("accepting a peer connection failed", "addr", m.ln.Addr().String(), "err", err)
			timer := time.NewTimer(50 * time.Millisecond)
			select {
			case <-m.base.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
			continue
		}
		m.wg.Add(1)
		go m.handle(c.(*net.TCPConn))
	}
}

// handle runs the listener side of one handshake.
func (m *Mesh) handle(c *net.TCPConn) {
	defer m.wg.Done()
	m.mu.Lock()
	if m.closing {
		m.mu.Unlock()
		c.Close()
		return
	}
	m.handshakes[c] = struct{}{}
	m.mu.Unlock()
	keep := false
	defer func() {
		m.mu.Lock()
		delete(m.handshakes, c)
		m.mu.Unlock()
		if !keep {
			c.Close()
		}
	}()

	remote := c.RemoteAddr().String()
	c.SetDeadline(time.Now().Add(m.cfg.HandshakeTimeout))
	h, err := readHello(c)
	if err != nil {
		m.log.Debug("ignoring connection", "remote", remote, "err", err)
		return
	}
	if reason, unauthenticated := m.checkHello(h); reason != "" {
		writeStatus(c, statusRejected, reason)
		m.rejected(h, remote, reason, unauthenticated)
		return
	}
	if m.refuseMembership(c, h, remote) {
		return
	}
	from := int(h.from)
	switch h.kind {
	case kindLink:
		keep = m.handleLink(c, h, remote)
	case kindNotice:
		if m.accept(c, h) != nil {
			return
		}
		n, err := readNotice(c)
		if err != nil {
			return
		}
		m.onNotice(from, n)
		writeStatus(c, 0, "")
	case kindProbe:
		if m.accept(c, h) == nil {
			a := probeAnswer{recvFrom: int(m.recvPeer.Load()) - 1, sendTo: int(m.sendPeer.Load()) - 1, culprit: -1}
			if m.isFailed() {
				<-m.settled
				a.culprit = culpritOf(m.cause, -1)
			}
			writeProbeAnswer(c, a)
		}
	default:
		writeStatus(c, statusRejected, fmt.Sprintf("unknown connection kind %d", h.kind))
	}
}

// accept answers h with an accepting reply, which proves this rank's peer
// token when h proved the dialer's.
func (m *Mesh) accept(c net.Conn, h hello) error {
	if err := writeStatus(c, 0, ""); err != nil {
		return err
	}
	if m.auth != nil {
		return m.auth.writeReplyMAC(c, h)
	}
	return nil
}

// checkHello returns why h must be rejected, or "", and whether the reason
// is that h is not authenticated. Authentication comes before the other
// checks, so a stranger learns nothing about the job.
func (m *Mesh) checkHello(h hello) (reason string, unauthenticated bool) {
	rank := m.cfg.Rank
	if h.version != protoVersion {
		return fmt.Sprintf("protocol version %d, but rank %d speaks version %d", h.version, rank, protoVersion), m.auth != nil
	}
	if m.auth != nil {
		if reason := m.auth.verify(h, rank, time.Now()); reason != "" {
			return reason, true
		}
	} else if h.proof != nil {
		return fmt.Sprintf("the hello carries a peer-token proof, but rank %d has no peer token (set %s for every rank or for none)", rank, EnvPeerToken), false
	}
	if int(h.world) != m.cfg.WorldSize && h.epoch != m.epoch() {
		// Another membership with another world (Comm.Shrink): its ranks
		// are numbered differently; checkIncarnations answers it.
		return "", false
	}
	switch {
	case h.order != byteOrderMark:
		return fmt.Sprintf("rank %d has a different byte order", rank), false
	case h.jobID != m.cfg.JobID:
		return fmt.Sprintf("job id %q, but rank %d belongs to job %q", h.jobID, rank, m.cfg.JobID), false
	case int(h.world) != m.cfg.WorldSize:
		return fmt.Sprintf("world size %d, but rank %d has world size %d", h.world, rank, m.cfg.WorldSize), false
	case int(h.to) != rank:
		return fmt.Sprintf("addressed to rank %d, but this is rank %d (check the order of the peer addresses)", h.to, rank), false
	case int(h.from) >= m.cfg.WorldSize || int(h.from) == rank:
		return fmt.Sprintf("sender claims to be rank %d", h.from), false
	}
	return "", false
}

// replacedPrefix starts the reason of a refusal that tells the dialer it
// was replaced; the dialer turns it into ErrReplaced.
const replacedPrefix = "replaced: "

// checkIncarnations compares the incarnations in an authenticated hello
// with this member's view. It returns "" when they agree; otherwise why
// not, and whether the refusal is final (a stale incarnation on either
// side) or only "not yet" (the dialer knows of a replacement this member
// has not heard of).
func (m *Mesh) checkIncarnations(h hello) (reason string, final bool) {
	from, mine, epoch := int(h.from), m.incarnation(m.cfg.Rank), m.epoch()
	if int(h.world) != m.cfg.WorldSize {
		if h.epoch > epoch {
			return fmt.Sprintf("rank %d has not yet heard of the world of %d that rank %d knows of (membership epoch %d, rank %d is at %d)",
				m.cfg.Rank, h.world, from, h.epoch, m.cfg.Rank, epoch), false
		}
		return fmt.Sprintf("%sthe world of %d at membership epoch %d is stale: the members now form a world of %d at epoch %d",
			replacedPrefix, h.world, h.epoch, m.cfg.WorldSize, epoch), true
	}
	switch want := m.incarnation(from); {
	case h.fromInc < want:
		return fmt.Sprintf("%sincarnation %d of rank %d is stale: rank %d expects incarnation %d", replacedPrefix, h.fromInc, from, m.cfg.Rank, want), true
	case h.toInc > mine:
		return fmt.Sprintf("rank %d expects incarnation %d of rank %d, but this is incarnation %d, which was replaced", from, h.toInc, m.cfg.Rank, mine), true
	case h.epoch > epoch || h.fromInc > want || h.toInc < mine:
		return fmt.Sprintf("rank %d has not yet heard of the replacement rank %d knows of (membership epoch %d, rank %d is at %d)", m.cfg.Rank, from, h.epoch, m.cfg.Rank, epoch), false
	case h.epoch < epoch:
		return fmt.Sprintf("rank %d is at membership epoch %d, but rank %d at %d: it has not rejoined yet", m.cfg.Rank, epoch, from, h.epoch), false
	}
	return "", false
}

// refuseMembership answers an authenticated hello whose sender sees
// another membership than this member (checkIncarnations), and says
// whether it did.
func (m *Mesh) refuseMembership(c net.Conn, h hello, remote string) bool {
	reason, final := m.checkIncarnations(h)
	switch {
	case reason == "":
		return false
	case !final:
		m.log.Debug("peer connection from another membership: asked to retry", "remote", remote, "claimed_rank", h.from, "reason", reason)
		writeStatus(c, statusNotYet, reason)
	default:
		// Not a failure of this member's setup: a stale process must not
		// stop the members that replaced it from connecting.
		m.log.Warn("refused a stale incarnation", "remote", remote, "claimed_rank", h.from, "reason", reason)
		writeStatus(c, statusRejected, reason)
	}
	return true
}

// rejected makes a stream rejected while connecting (or before this rank
// started to) fail this rank's setup too, naming the peer: both sides of
// a misconfiguration report it. An unauthenticated stream is only
// remembered, since anyone could send it; the setup fails when the real
// stream does not come.
func (m *Mesh) rejected(h hello, remote, reason string, unauthenticated bool) {
	m.log.Warn("rejected peer connection", "remote", remote, "claimed_rank", h.from, "reason", reason)
	if h.kind != kindLink {
		return
	}
	m.mu.Lock()
	// Before this rank asks for its streams counts as setup too: a peer
	// that started sooner may have dialled, been refused and given up
	// already, and its notice may itself be refused (the ranks disagree
	// on the token), so this is the only word of it this rank will get.
	setup := m.establishing || (m.arrivals == nil && !m.closing)
	if setup && unauthenticated && int(h.from) < m.cfg.WorldSize {
		m.refused[int(h.from)] = refusal{remote: remote, reason: reason}
	}
	m.mu.Unlock()
	if !setup || unauthenticated {
		return
	}
	var err error
	if int(h.from) < m.cfg.WorldSize {
		err = &PeerError{Rank: int(h.from), Addr: m.Addr(int(h.from)), Err: fmt.Errorf("%w: connection from %s: %s", ErrHandshake, remote, reason)}
	} else {
		err = fmt.Errorf("%w: connection from %s: %s", ErrHandshake, remote, reason)
	}
	select {
	case m.setupErr <- err:
	default:
	}
}

// Close fails the mesh with ErrClosed (without telling the other members:
// a member that leaves on purpose says so with Abort first), stops the
// listener and waits for its goroutines.
func (m *Mesh) Close() error {
	m.closeOnce.Do(func() {
		m.fail(fmt.Errorf("%w: rank %d", ErrClosed, m.cfg.Rank), m.cfg.Rank, false)
		m.notices.Wait() // bounded by cfg.NoticeTimeout
		m.mu.Lock()
		m.closing = true
		if m.arrivals == nil {
			close(m.streamsAsked)
		}
		for c := range m.handshakes {
			c.Close()
		}
		m.mu.Unlock()
		m.cancelBase()
		m.ln.Close()
		m.wg.Wait()
	})
	return nil
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
