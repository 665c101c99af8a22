// Package collective is Spindle's collective-communication library for Go
// trainers: ring allreduce (sum and mean of float32 or float64), broadcast,
// allgather and barrier between the ranks of a job, over direct TCP
// connections between the training processes. The driver is never on the
// data path.
//
// # Joining
//
// A training process started by a Spindle executor joins with FromEnv,
// which reads SPINDLE_RANK, SPINDLE_WORLD_SIZE, SPINDLE_PEERS,
// SPINDLE_PEER_LISTEN_FD (the peer port, already bound by the executor),
// SPINDLE_JOB_ID, SPINDLE_COLLECTIVE_TIMEOUT and SPINDLE_PEER_TOKEN (the
// job's peer token, which authenticates the connections between ranks).
// Other programs build a Config and call New. A data-parallel training step then looks like:
//
//	comm, err := collective.FromEnv(ctx)
//	if err != nil {
//		return err
//	}
//	defer comm.Close()
//	// Start from the same weights everywhere.
//	if err := collective.Broadcast(ctx, comm, weights, 0); err != nil {
//		return err
//	}
//	for batch := range batches {
//		grads := computeGradients(weights, batch)
//		if err := collective.AllReduce(ctx, comm, grads, collective.Mean); err != nil {
//			return err // names the lost or stalled rank; see PeerError
//		}
//		applyGradients(weights, grads) // identical on every rank
//	}
//
// # Topology and algorithms
//
// Each rank keeps two connections: one to its right neighbour
// (rank+1 mod n), which it sends on, and one from its left neighbour, which
// it receives on. Allreduce is the bandwidth-optimal ring algorithm (a
// reduce-scatter then an allgather, each of n-1 steps), so every rank sends
// and receives 2(n-1)/n of the tensor. Data moves in chunks of
// Config.ChunkBytes, and sending runs concurrently with receiving and
// reducing, so the link stays busy while the CPU adds.
//
// Every element is reduced by exactly one rank, in a fixed order, and the
// final bits are then copied to the others: all ranks end with bit-identical
// results, so replicas of a model never drift apart.
//
// # Failure
//
// A peer that dies (its connection breaks) or stalls (no progress for
// Config.Timeout) turns into an error on every surviving rank, never a hang.
// The rank that detects the failure tells every other rank over a short
// notice connection before giving up, so all survivors fail at once and
// blame the same rank (a *PeerError naming its rank and address). The error
// wraps ErrPeerLost, ErrPeerTimeout, ErrAborted or ErrMismatch. Cancelling an
// operation's context aborts it on this rank and, through the same notices,
// on the others. A failed communicator stays failed; training recovers by
// restarting the gang, which is Spindle's failure policy's job.
//
// The transport is behind the small Transport interface; TCP is the one
// implementation today. Connections are checked by a handshake (protocol
// version, byte order, job id, world size and ranks). With a peer token
// (Config.Token; the executor sets SPINDLE_PEER_TOKEN, derived from the
// job's secret) the handshake is also mutually authenticated, so only
// processes of the job can join its ring or abort it; without one, only the
// job id is checked. Data is never encrypted: the peer ports should only be
// reachable from the cluster's own network.
package collective
