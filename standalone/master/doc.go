// Package master is a standalone cluster master (spindle master): one
// member of a Raft group (hashicorp/raft, with the log and stable store in
// raft-boltdb and file snapshots) that replicates the cluster state:
// workers and their resources, applications, and executor placements and
// states.
//
// Every master serves the gRPC API (standalone/standalonepb, service Master).
// Reads come from the master's own replica; writes are committed through
// the leader, followers forwarding them, so a client given every master
// never needs to know which one leads. The leader alone also:
//
//   - places gangs of executors, all or nothing, first come first served
//     with per-application caps, spreading or packing them over workers;
//   - launches them on workers (service Worker) and records what runs;
//   - declares workers lost when they stop heartbeating, and ends
//     applications whose driver went silent;
//   - stops executors that are to be stopped, and tells workers when an
//     application ended so they clean up.
//
// State that only the leader needs (last heartbeats, the gang queue) is
// not replicated: a new leader starts afresh and gives everyone a full
// timeout to check in.
//
// Raft peers authenticate each other with a challenge-response on the
// cluster secret when a connection opens (raftnet.go), inside mutual TLS
// when certificates are configured; gRPC calls carry per-call HMAC
// credentials (internal/auth).
package master
