// Package slogadapter lets libraries that log through hclog (hashicorp/raft)
// write onto the process's log/slog handler, so there is one log stream
// with one format.
package slogadapter
