// Package executor is the runtime of one training rank. An executor is a
// real process (`spindle executor`, started by a cluster manager). It
// reserves the ports its training process will use, registers with the
// driver over the authenticated control plane, receives its rank, the
// cluster spec and its task, then starts the training command with
// Spindle's environment contract and feeds it its splits as Arrow record
// batches over a local socket. It heartbeats progress to the driver, stops
// the training process when told to or when the driver is gone, and reports
// how the process ended.
package executor
