// Package auth authenticates Spindle's control-plane connections with a
// shared secret: a per-job secret between a driver and its executors, a
// cluster secret between standalone masters, workers and drivers.
//
// The secret never crosses the wire. Each call carries a token made of a
// timestamp, a random nonce and an HMAC-SHA256 over the method name, the
// timestamp, the nonce and a digest of the call's request message (a server
// stream's one request too; for a stream of many requests the digest is
// empty), and over the audience, the server it is meant for. The server
// recomputes the HMAC over the request it received and refuses calls whose
// token is missing or wrong, outside the allowed clock skew, older than
// the server, or seen before: a token captured on the wire authorises
// neither another request nor the same request a second time.
package auth
