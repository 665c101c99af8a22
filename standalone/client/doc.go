// Package client talks to the standalone cluster's masters on behalf of
// workers, drivers and admin commands. Given every master's address, it
// finds one that answers: followers forward writes to the leader, and a
// call that fails because a master is down, not leading or mid-election is
// retried on the others until the caller's context ends, so callers never
// need to know which master leads.
package client
