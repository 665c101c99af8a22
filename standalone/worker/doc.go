// Package worker is the standalone cluster's node agent (spindle worker).
//
// A worker registers its cores, memory and GPUs with the masters,
// heartbeats, and runs executors when the leading master asks: each one is
// the worker's own spindle binary started with the driver's arguments, in
// its own process group and work directory (stdout and stderr go to
// files there), inside a cgroup v2 with CPU and memory limits when the
// machine delegates one, and with CUDA_VISIBLE_DEVICES naming its GPUs. It
// reports exits, stops executors of ended applications and cleans their
// directories up.
//
// The worker's gRPC service refuses every call that is not signed with the
// cluster secret: it launches nothing for an unauthenticated caller. When
// it loses the leader it keeps its executors running and finds the new
// one.
package worker
