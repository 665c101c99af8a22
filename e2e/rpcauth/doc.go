// Package rpcauth holds one test that starts every gRPC server the product
// runs, each with its real credential scheme, and checks that a caller
// without the secret (no credentials, or a wrong secret) is refused before
// anything runs. It is a package of its own because the servers live in
// rooms that may not import each other.
package rpcauth
