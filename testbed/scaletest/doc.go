// Package scaletest measures Spindle's control plane at cluster scale on one
// machine: hundreds to thousands of simulated executors speak the real
// control-plane protocol (register, heartbeats with progress, usage,
// reported values and spans, exit reports) to a real, in-process driver,
// with its web UI, /metrics and event log on.
//
// The simulated executors run in a child process (the swarm), so that what
// the driver's process spends in CPU and memory is the driver's alone. A
// Manager is the driver's ClusterManager: it starts executors in the swarm
// after a container-start latency, as a cluster would, and turns what the
// swarm says back into executor events.
//
// Run measures one world size; `make scale` runs it at 100 to 2,000 ranks
// and writes the table in docs/scale.md.
package scaletest
