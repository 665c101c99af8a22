// Package auth authenticates Spindle's control-plane connections with a
// shared secret: a per-job secret between a driver and its executors, a
// cluster secret between standalone masters, workers and drivers.
//
// The secret never crosses the wire. Each call carries a token made of a
// timestamp, a random nonce and an HMAC-SHA256 over the method name, the
// timestamp and the nonce; the server recomputes the HMAC and refuses calls
// whose token is missing, wrong or outside the allowed clock skew.
package auth
