// Package peercred authenticates the gRPC connections between the ranks of
// one job (parameter-server clients and servers) with the job's peer
// token, which every rank holds and which never crosses the wire.
//
// On each new connection the server sends a fresh nonce; the client
// answers with its own nonce and an HMAC-SHA256, under the token, of both
// nonces and the purpose; the server checks it and proves itself the same
// way. A connection whose proof is missing or wrong is closed before any
// call is read, so an unauthenticated caller reaches no handler, and a
// recorded handshake is worthless on another connection (the server's
// nonce differs). The traffic after the handshake is not encrypted, as
// the collectives' is not: the mesh carries gradients, not secrets.
package peercred
