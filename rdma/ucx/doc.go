// Package ucx is a collective data link over UCX's UCP API: one code path
// for InfiniBand and RoCE (verbs), shared memory and TCP, chosen by UCX
// (UCX_TLS, UCX_NET_DEVICES; the rdma package sets them per rank).
//
// The link is built only with -tags ucx (it needs UCX's headers, from
// Debian's libucx-dev, at build time) and loads libucp.so.0 at run time
// with dlopen, as NCCL loads libibverbs: a binary built with the tag still
// starts, and reports UCX as unavailable, on a host without UCX. Without
// the tag, NewLinker always fails with ErrUnavailable.
//
// The link only moves bytes; the collective package's peer mesh
// authenticates the ranks, carries their worker addresses over its
// streams, and turns a broken or silent link into the one failure all
// ranks agree on. Messages are tagged with the sender's rank and a
// sequence number, so they are taken in order; sends above a segment size
// go out as several messages in flight at once, received straight into the
// caller's buffer (pinned while UCX uses it, registered by UCX's
// registration cache, which keeps a communicator's reused buffers
// registered); small ones go through a per-direction bounce buffer
// allocated once. A waiting call polls the worker briefly, then sleeps on
// the worker's event descriptor (ucp_worker_arm), so an idle link costs no
// CPU.
//
// Status: unfinished. Built with -tags ucx, its tests crash in UCX (a
// request not returned to its pool, then SIGSEGV) over UCX's TCP
// transport; nothing selects this link yet, and the default build does
// not contain it.
package ucx
