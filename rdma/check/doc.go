// Package check is `spindle rdma check`: it tells an administrator what a
// host's RDMA looks like to Spindle, and whether two hosts can move bytes
// between them over Spindle's data links.
//
// WriteDevices prints the host's devices and ports as the rdma package
// discovers them (state, link layer, rate, GIDs, network interface) and
// the ports a job would select. Listen and Dial run a short test between
// two hosts: the dialing side (--peer) connects to the listening one
// (--listen), both prove they hold the same token (an HMAC over fresh
// nonces; the token never crosses the network), and then, over Spindle's
// TCP link and over the UCX link in turn, they measure the round-trip
// latency of small messages and the bandwidth of large ones each way.
// The links are built exactly as a job's communicator builds them, from
// authenticated TCP streams, so a check that passes means a job's
// collectives can run between the two hosts.
package check
