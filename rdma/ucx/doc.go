// Package ucx is a collective data link over UCX's UCP API: one code path
// for InfiniBand and RoCE (verbs), shared memory and TCP, chosen by UCX
// (UCX_TLS, UCX_NET_DEVICES; the rdma package sets them per rank).
//
// It is part of the default build: a thin cgo layer (shim.c) loads
// libucp.so.0 at run time with dlopen, as NCCL loads libibverbs, so a
// binary starts on a host without UCX and reports UCX unavailable
// (Available). UCX's headers (Debian's libucx-dev) are needed at build
// time for the layer to be real; without them, or without cgo, it builds
// as a stub that is never available.
//
// Importing the package registers the "ucx" link kind with the collective
// package: SPINDLE_COLLECTIVE_LINK=ucx (which the executor sets from
// spindle.rdma.mode) selects it in collective.ConfigFromEnv. Go trainers
// that join with task.Env.Comm have it; a program that calls
// collective.FromEnv itself imports this package for it. Over each of
// the mesh's streams the two ranks negotiate (collective.Negotiate): a
// direction runs over UCX when both ends offer it and UCX brings a
// transport Spindle's own link lacks (RDMA between hosts; choose.go), or
// when forced (ucx:forced); otherwise Spindle's own link carries it
// (shared memory on one host, TCP sockets), with one log line saying why.
//
// The link only moves bytes; the collective package's peer mesh
// authenticates the ranks, carries their worker addresses over its
// streams, and turns a broken or silent link into the one failure all
// ranks agree on. Messages are tagged with the sender's rank and a
// sequence number, so they are taken in order; sends above a segment size
// go out as several messages in flight at once, received straight into the
// caller's buffer (pinned while UCX uses it, and registered by UCX's
// registration cache, which keeps a communicator's reused buffers
// registered); small ones go through a per-direction bounce buffer
// allocated once. The ring's reduction receives in place except over
// shared memory: a whole chunk's messages are posted at once into a
// reused landing buffer, and each run of them is reduced as soon as it
// has landed. A waiting call polls the worker for 50 us after the last
// movement, yielding the processor to other processes between polls (a
// neighbour rank on the same core may be the one to move the bytes), then
// sleeps on the worker's event descriptor (ucp_worker_arm), so an idle
// link costs no CPU. The collectives leave UCX's rendezvous threshold to
// UCX; the parameter server's sessions send eagerly on UCX's TCP
// transport alone (UCX_TLS=tcp). The mesh streams of
// UCX directions stay open: a neighbour's process ending closes them,
// which fails the calls waiting on it once it has taken what the
// neighbour sent before it went.
//
// Memory rules: UCX keeps the addresses of a request's buffer until the
// request completes, so Go buffers are pinned (runtime.Pinner) until then.
// A call that fails cancels its requests; one UCX cannot end at once stays
// owned by the link, with its pins, until Close has closed the endpoints,
// ended every request and destroyed the worker. Close waits for the calls
// in progress to leave before it touches the worker.
//
// The package also carries requests and replies (Listener, Dialer, Conn):
// the parameter server's pulls and pushes when the job's data link is
// UCX. A Listener serves only sessions its caller accepted after
// authenticating the peer on a channel of its own, and only requests that
// carry the session's grant (a random id and 128-bit key); anything else
// is dropped unanswered. A request's body pieces go from the caller's
// memory in place (UCX's IOV datatype), a reply's payload lands in place
// in the caller's buffer when its size is the expected one, and the
// messages' slots and buffers are reused call after call. Addresses of
// Go buffers are written into the C iov arrays as integers, never as
// pointers: the collector's write barrier would take an entry's previous
// contents for a live pointer.
package ucx
