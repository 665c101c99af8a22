package collective

import "context"

// Transport moves bytes between this rank and its peers. The communicator
// builds every operation from Send and Recv between ring neighbours, so a
// transport only needs links from rank r to rank (r+1) mod n and from rank
// (r-1) mod n to rank r. New builds one from a Mesh and a data Link, which
// gives it the failure semantics below; to add a way of moving bytes,
// implement a Link (and its Linker) rather than a Transport.
//
// Contract:
//   - Bytes sent to a peer arrive at that peer's Recv in order, as one
//     stream per (sender, receiver) pair; message boundaries are not kept.
//   - Send and Recv may run concurrently with each other (full duplex),
//     but calls for the same direction and peer are never concurrent.
//   - Send does not retain p after it returns, and Recv writes p only
//     before it returns: the communicator reuses and overwrites buffers
//     as soon as the calls return.
//   - A call returns an error when the peer makes no progress for the
//     transport's timeout, when the link breaks, or when ctx is done; it
//     never blocks forever.
//   - Failure is sticky and shared: after any Send or Recv error, every
//     later call returns the same error, and the transport tells the other
//     ranks, so that their pending calls fail too and blame the same rank
//     (a *PeerError).
type Transport interface {
	// Send writes all of p to peer.
	Send(ctx context.Context, peer int, p []byte) error
	// Recv reads exactly len(p) bytes from peer into p.
	Recv(ctx context.Context, peer int, p []byte) error
	// Abort gives up on the communicator: pending and later calls fail with
	// an error wrapping ErrAborted and cause, and the other ranks are told.
	Abort(cause error)
	// Close releases the links and the listener. Pending calls fail with
	// ErrClosed. Peers see this rank's links close.
	Close() error
}
