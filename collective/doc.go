// Package collective is Spindle's collective-communication library for Go
// trainers: allreduce (sum and mean of float32 or float64; a ring, or a
// binomial tree for small vectors), broadcast,
// allgather and barrier between the ranks of a job, over direct links
// between the training processes (TCP, or RDMA through UCX). The driver is
// never on the data path.
//
// # Joining
//
// A training process started by a Spindle executor joins with FromEnv,
// which reads SPINDLE_RANK, SPINDLE_WORLD_SIZE, SPINDLE_PEERS (or, in a
// job of thousands of ranks, the file SPINDLE_PEERS_FILE names),
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
// Each rank keeps connections to and from its ring neighbours (rank±1 mod
// n) and its parent and children in a binomial tree rooted at rank 0, at
// most 2+log2 n peers. Allreduce of a large vector is the bandwidth-optimal
// ring algorithm (a reduce-scatter then an allgather, each of n-1 steps),
// so every rank sends and receives 2(n-1)/n of the tensor. Data moves in
// chunks of Config.ChunkBytes, and sending runs concurrently with
// receiving and reducing, so the link stays busy while the CPU adds. A
// vector of at most Config.SmallBytes (by default DefaultSmallBytes, from
// a latency-bandwidth model) and Barrier go up the tree and back down
// instead: 2 log2 n steps rather than 2(n-1), which is what many ranks need
// for small messages. With Config.RanksPerHost, an allreduce may run
// hierarchically instead (within hosts, across them, within again; four
// more peers a rank), in 2(g-1)+2(H-1) steps for H hosts of g ranks; a
// per-link cost model picks the tree, the hierarchy or the ring by size
// (choose.go). When every rank is on one host and the link goes through
// shared memory, allreduces of at most 16 KiB and barriers run on a host
// segment instead (host.go): each rank writes its vector into one shared
// file and counts itself in, the last to arrive reduces in the tree's
// order and wakes the others with one futex wake.
// Broadcast and allgather always run the ring.
//
// With either algorithm, every element is reduced by exactly one rank, in a
// fixed order, and the final bits are then copied to the others: all ranks end with bit-identical
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
// restarting the gang, which is Spindle's failure policy's job, or, when
// one rank's process was lost (LostRank), by replacing that rank alone:
// the replacement joins with New on a new address and the next
// incarnation of the rank (Config.Incarnations), every survivor calls
// Comm.Rejoin with the same addresses and incarnations, and a survivor
// broadcasts the model state to the replacement. The handshake carries
// the incarnations, so the lost process, should it still be alive, is
// refused with ErrReplaced. Or the survivors go on without the lost rank:
// each calls Comm.Shrink with the smaller world's addresses, its own
// among them (its index is its new rank), and incarnations summing to
// more than before, so the old world's processes are refused.
//
// A network partition between two ranks (both ways or one way) is named
// too: a rank whose silent peer waits on a third rank probes that rank
// itself, and blames it when it does not answer either; a probed rank
// that already failed answers with the rank it blamed, so a notice lost
// in the partition does not make a survivor blame an innocent neighbour.
//
// A slow link fails nothing, but every rank times a probe of each linked
// peer every Config.LinkCheck, and a link whose probes take longer than
// Config.SlowLink twice in a row is logged and given to Config.OnSlowLink
// (task.Env.Comm reports it to the job page, which lists slow links by
// pair).
//
// # Peer mesh and data links
//
// A communicator is two layers. The peer mesh (Mesh) owns membership and
// failure: every rank listens on its peer port, every connection starts
// with a hello that is checked (protocol version, byte order, job id,
// world size and ranks), the notices and probes described above travel
// over it, and it records the one failure, blaming one rank, that every
// rank then reports. With a peer token (Config.Token; the executor sets
// SPINDLE_PEER_TOKEN, derived from the job's secret) every hello is also
// mutually authenticated (an HMAC with a timestamp and a nonce against
// replay), so only processes of the job can join its ring, probe it or
// abort it; without one, only the job id is checked.
//
// A data link (Link, built by a Linker set in Config.Link) only moves
// bytes between ring neighbours: it reports a broken link or a lack of
// progress, and the mesh decides whom to blame, so every link has the same
// failure semantics without re-implementing them. The links are:
//
//   - TCP (TCPLinker, the default): the mesh's authenticated streams
//     carry the data themselves; between ranks on one host (the same boot
//     id and /dev/shm) the bytes go through a shared-memory ring per
//     stream instead, copied once, reduced where they lie, with the stream
//     as its doorbell (link_shm.go; Config.NoSharedMemory turns it off).
//   - UCX (package rdma/ucx): RDMA verbs, RoCE, shared memory or TCP
//     through UCX's UCP API, bootstrapped over the mesh's streams and
//     selected by SPINDLE_COLLECTIVE_LINK. FromEnv finds it only in a
//     program that imports rdma/ucx (task.Env.Comm does).
//   - In-memory (MemNetwork), for tests: the ranks of one process exchange
//     bytes through memory, and a test can drop, delay, partition or reset
//     the bytes between any two ranks, as hashicorp/raft's in-memory
//     transport lets its tests break the network.
//
// Data is never encrypted: the peer ports should only be reachable from
// the cluster's own network.
//
// # The mesh for other services of a job
//
// A parameter server, or any other service whose processes must agree on
// who failed, can build its own Mesh on its own port with the job's
// token, and keep its own data path (gRPC, say):
//
//	mesh, err := collective.NewMesh(collective.MeshConfig{
//		Rank: rank, WorldSize: n, Peers: meshAddrs, Listener: ln,
//		JobID: jobID, Token: os.Getenv(collective.EnvPeerToken),
//		Timeout: 30 * time.Second,
//	})
//	defer mesh.Close()
//	// A call to server s failed (a broken stream, a deadline): let the
//	// mesh diagnose it and tell every member, and fail with what they
//	// all agree on.
//	if err != nil {
//		return mesh.Blame(ctx, s, err)
//	}
//	// Stop serving when any member failed.
//	<-mesh.Done(); log(mesh.Err())
//
// Mesh.Abort gives up on purpose (shutdown mid-job), Mesh.Streams returns
// authenticated byte streams between members for bootstrapping anything
// else. The members' ranks are the mesh's own: a service numbers its
// processes as it likes, as long as every member has the same Peers.
package collective
