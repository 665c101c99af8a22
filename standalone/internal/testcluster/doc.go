// Package testcluster starts real standalone masters and workers inside a
// test process: Raft over loopback TCP with small timeouts, gRPC on free
// ports, workers that launch real child processes. Tests of the workers,
// the driver's cluster manager and the benchmarks share it.
package testcluster
