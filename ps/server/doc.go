// Package server is Spindle's parameter server: one shard of every table
// of a job, the optimizers that apply the workers' gradients to it, and
// the clocks that hold fast workers to the job's staleness bound.
//
// A job's servers are its ranks of role ps, each running spindle ps serve
// on its peer port, behind the job's peer-token handshake
// (internal/peercred). Keys reach the server that owns them on the ring
// (package ps); a request routed by another version of the ring is
// refused as stale, so the client refreshes it and retries.
//
// When the job's data link is UCX (Config.DataLink), workers' pulls and
// pushes may come over UCX instead (rdma/ucx): a worker opens a session
// with OpenDataLink over its authenticated gRPC connection, and the
// server serves its requests with the same code as the gRPC calls.
package server
