package collective

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Link is a data link: it only moves bytes between this rank and its ring
// neighbours. Membership, authentication and failure belong to the Mesh
// the link was built on; a link reports what happened to its own calls
// and the mesh decides whom to blame.
//
// Contract:
//   - Bytes sent to a peer arrive at that peer's Recv in order, as one
//     stream per (sender, receiver) pair; message boundaries are not kept.
//   - Send and Recv may run concurrently with each other (full duplex),
//     but calls for the same direction and peer are never concurrent.
//   - Send does not retain p after it returns, and Recv writes p only
//     before it returns.
//   - A call whose peer makes no progress for LinkSetup.Timeout returns an
//     error wrapping os.ErrDeadlineExceeded; a call whose link broke
//     returns any other error; a call whose ctx is done returns promptly.
//   - Interrupt makes pending and later calls return an error at once; it
//     is called when the mesh fails and is never undone.
type Link interface {
	// Send writes all of p to peer.
	Send(ctx context.Context, peer int, p []byte) error
	// Recv reads exactly len(p) bytes from peer into p.
	Recv(ctx context.Context, peer int, p []byte) error
	// Interrupt makes pending and later calls fail at once.
	Interrupt()
	// Close releases the link; peers see it break.
	Close() error
}

// Carrier is a Link that says what carries its bytes: "tcp", "shared
// memory", "rdma", or several of them joined by "+", sorted.
type Carrier interface {
	Over() string
}

// Over says what carries l's bytes (Carrier), or "" when l does not say.
func Over(l Link) string {
	if c, ok := l.(Carrier); ok {
		return c.Over()
	}
	return ""
}

// inPlaceReceiver is a Link that can hand received bytes to the caller
// where they lie (a shared-memory ring) instead of copying them into a
// buffer, which saves the reduction a copy.
type inPlaceReceiver interface {
	// RecvInPlace receives the next n bytes from peer and passes them to
	// fn in order, in pieces whose lengths and addresses are multiples of
	// align, gathering a piece into scratch where it must. ok is false,
	// and nothing was received, when the link to peer cannot.
	RecvInPlace(ctx context.Context, peer, n, align int, scratch []byte, fn func([]byte)) (ok bool, err error)
}

// Linker builds the data link of one rank. Config.Link selects it; nil
// means TCP (TCPLinker).
type Linker interface {
	// Name names the link kind in logs and errors ("tcp", "ucx", "mem").
	Name() string
	// Link builds this rank's link from the authenticated streams the mesh
	// established. It owns the streams: it may carry data over them (TCP),
	// use them to exchange addresses and close them (UCX), or close them.
	Link(ctx context.Context, s LinkSetup) (Link, error)
}

// LinkSetup is what a Linker gets from the mesh.
type LinkSetup struct {
	// Rank and WorldSize are this rank's.
	Rank, WorldSize int
	// Peers holds every rank's peer address, for messages.
	Peers []string
	// Timeout is the progress timeout of Send and Recv.
	Timeout time.Duration
	// SetupTimeout bounds the link's own exchanges over the streams
	// before its first operation (the shared-memory hello, Negotiate's
	// offers) when longer than Timeout: the mesh's handshake timeout, so
	// that a short progress timeout does not fail the setup on a loaded
	// host, where mapping a ring can take longer than an operation's
	// progress may.
	SetupTimeout time.Duration
	// Out[p] is an authenticated stream to each rank p this rank sends to,
	// In[p] one from each rank p it receives from; nil for other ranks.
	Out, In []*net.TCPConn
	// Logger carries the communicator's attributes.
	Logger *slog.Logger
}

// setupDeadline is when the link's setup exchanges give up: the longer of
// Timeout and SetupTimeout from now, or ctx's deadline when sooner.
func (s LinkSetup) setupDeadline(ctx context.Context) time.Time {
	deadline := time.Now().Add(max(s.Timeout, s.SetupTimeout))
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	return deadline
}

// meshTransport is the Transport of a communicator: a Link for the bytes
// and a Mesh for everything that can go wrong with them.
type meshTransport struct {
	mesh *Mesh
	link Link
}

var _ Transport = (*meshTransport)(nil)

// connect builds the mesh and the data link of one rank.
func connect(ctx context.Context, cfg Config, log *slog.Logger, sendTo, recvFrom []int) (*meshTransport, error) {
	m, err := NewMesh(MeshConfig{
		Rank:             cfg.Rank,
		WorldSize:        cfg.WorldSize,
		Peers:            cfg.Peers,
		Incarnations:     cfg.Incarnations,
		Listener:         cfg.Listener,
		JobID:            cfg.JobID,
		Token:            cfg.Token,
		Timeout:          cfg.Timeout,
		ConnectTimeout:   cfg.ConnectTimeout,
		HandshakeTimeout: cfg.HandshakeTimeout,
		NoticeTimeout:    cfg.NoticeTimeout,
		ProbeTimeout:     cfg.ProbeTimeout,
		Logger:           log,
	})
	if err != nil {
		return nil, err
	}
	out, in, err := m.Streams(ctx, sendTo, recvFrom)
	if err != nil {
		m.Close()
		return nil, err
	}
	linker := cfg.Link
	if linker == nil {
		linker = TCPLinker{SocketBufferBytes: cfg.SocketBufferBytes, NoSharedMemory: cfg.NoSharedMemory}
	}
	link, err := linker.Link(ctx, LinkSetup{
		Rank:         cfg.Rank,
		WorldSize:    cfg.WorldSize,
		Peers:        cfg.Peers,
		Timeout:      cfg.Timeout,
		SetupTimeout: cmp.Or(cfg.HandshakeTimeout, DefaultHandshakeTimeout),
		Out:          out,
		In:           in,
		Logger:       log,
	})
	if err != nil {
		err = fmt.Errorf("%s link: %w", linker.Name(), err)
		m.fail(err, culpritOf(err, cfg.Rank), true)
		m.Close()
		return nil, err
	}
	m.onInterrupt(link.Interrupt)
	return &meshTransport{mesh: m, link: link}, nil
}

// Send implements Transport.
func (t *meshTransport) Send(ctx context.Context, peer int, p []byte) error {
	if t.mesh.isFailed() {
		<-t.mesh.settled
		return t.mesh.cause
	}
	// Still active while the failure is diagnosed: a probe from another
	// rank must learn whom this one waits on.
	defer t.mesh.noteActive(peer, true)()
	if err := t.link.Send(ctx, peer, p); err != nil {
		return t.mesh.linkFailed(ctx, peer, err, "send")
	}
	return nil
}

// Recv implements Transport.
func (t *meshTransport) Recv(ctx context.Context, peer int, p []byte) error {
	if t.mesh.isFailed() {
		<-t.mesh.settled
		return t.mesh.cause
	}
	// Still active while the failure is diagnosed: a probe from another
	// rank must learn whom this one waits on.
	defer t.mesh.noteActive(peer, false)()
	if err := t.link.Recv(ctx, peer, p); err != nil {
		return t.mesh.linkFailed(ctx, peer, err, "receive")
	}
	return nil
}

// RecvInPlace implements inPlaceReceiver when the link does.
func (t *meshTransport) RecvInPlace(ctx context.Context, peer, n, align int, scratch []byte, fn func([]byte)) (bool, error) {
	ip, ok := t.link.(inPlaceReceiver)
	if !ok {
		return false, nil
	}
	if t.mesh.isFailed() {
		<-t.mesh.settled
		return true, t.mesh.cause
	}
	defer t.mesh.noteActive(peer, false)()
	ok, err := ip.RecvInPlace(ctx, peer, n, align, scratch, fn)
	if err != nil {
		return true, t.mesh.linkFailed(ctx, peer, err, "receive")
	}
	return ok, nil
}

// Abort implements Transport.
func (t *meshTransport) Abort(cause error) { t.mesh.Abort(cause) }

// Close implements Transport.
func (t *meshTransport) Close() error {
	t.mesh.Close()
	return t.link.Close()
}
