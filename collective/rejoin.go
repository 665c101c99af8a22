package collective

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
)

// Rejoin replaces this communicator, once it has failed because a peer was
// lost (see LostRank), with a new one over the same peer port, in which the
// lost rank is held by a replacement process: peers gives every rank's
// address (the replacement's is new) and incarnations every rank's
// incarnation (the replacement's is one more than the lost process's).
// Every survivor calls Rejoin with the same peers and incarnations, and the
// replacement calls New with them; the handshakes then refuse the lost
// process, should it still be alive, with ErrReplaced, and ask a survivor
// that has not rejoined yet to be waited for. Rejoin waits up to
// Config.ConnectTimeout for the others, like New.
//
// Rejoin closes c, whether it succeeds or not, so no operation may be in
// flight on c. The ranks' data do not survive: a survivor typically
// broadcasts its step and model state to the others right after.
func (c *Comm) Rejoin(ctx context.Context, peers []string, incarnations []uint32) (*Comm, error) {
	if len(peers) != c.world || len(incarnations) != c.world {
		c.Close()
		return nil, fmt.Errorf("collective: rejoin rank %d: %d addresses and %d incarnations for world size %d: need one of each per rank",
			c.rank, len(peers), len(incarnations), c.world)
	}
	if peers[c.rank] != c.cfg.Peers[c.rank] {
		c.Close()
		return nil, fmt.Errorf("collective: rejoin rank %d: its address changed from %s to %s: a survivor keeps its peer port",
			c.rank, c.cfg.Peers[c.rank], peers[c.rank])
	}
	ln, err := c.keepListener()
	c.Close()
	if err != nil {
		return nil, fmt.Errorf("collective: rejoin rank %d: keep the peer port %s: %w", c.rank, c.cfg.Peers[c.rank], err)
	}
	cfg := c.cfg
	cfg.Peers = slices.Clone(peers)
	cfg.Incarnations = slices.Clone(incarnations)
	cfg.Listener = ln
	c.log.Info("rejoining", "peers", cfg.Peers, "incarnations", cfg.Incarnations)
	return New(ctx, cfg)
}

// keepListener returns a duplicate of the communicator's listener, which
// outlives Close: connections that peers make in between wait in the
// socket's backlog for the new communicator.
func (c *Comm) keepListener() (net.Listener, error) {
	var ln net.Listener
	switch t := c.t.(type) {
	case nil:
		ln = c.ln
	case *meshTransport:
		ln = t.mesh.ln
	default:
		return nil, fmt.Errorf("a communicator built with NewWithTransport cannot rejoin")
	}
	return DuplicateListener(ln)
}

// DuplicateListener returns a second listener on ln's socket, which
// outlives ln's Close: New closes its Config.Listener when it fails, so a
// caller that may retry New with other peers hands it a duplicate.
func DuplicateListener(ln net.Listener) (net.Listener, error) {
	filer, ok := ln.(interface{ File() (*os.File, error) })
	if !ok {
		return nil, fmt.Errorf("the listener (%T) cannot be kept", ln)
	}
	f, err := filer.File()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return net.FileListener(f)
}
