// Package faultproxy is a TCP proxy that injects network faults into the
// connections it forwards, for the chaos harness and tests: it passes
// bytes through, pauses them (connections stay open, nothing moves until
// it passes again), blackholes them (bytes vanish and the peer hears
// nothing; the connections are cut when the blackhole ends, as a
// protocol that lost bytes could not go on), or drops every connection
// (reset at once, new ones refused), in both directions or in one only
// (SetToTarget, SetToClient: a one-way partition); it can also delay every chunk of
// bytes (SetDelay: a slow link) or hold a random share of them for a
// retransmission timeout (SetLoss: a lossy link, as TCP sees one). It
// listens on loopback; Spindle's
// control plane is pointed at it to see how the driver and executors
// live through a network that misbehaves, as etcd's test bridge does for
// etcd.
package faultproxy
