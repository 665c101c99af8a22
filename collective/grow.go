package collective

import (
	"context"
	"fmt"
	"slices"
)

// Grow replaces this communicator with one of a bigger world that the same
// processes form with newcomers: an elastic job growing back toward its
// size in place. peers gives the new world's addresses in its rank order;
// every member's address keeps its index (the newcomers' ranks come after
// the members'), and every member calls Grow with the same peers and
// incarnations at the same step, while each newcomer calls New with them.
//
// incarnations must sum to more than the old communicator's, so that the
// newcomers and the members meet only in the new world. Grow waits up to
// Config.ConnectTimeout for the others, like New, and closes c whether it
// succeeds or not, so no operation may be in flight on c. The newcomers
// have no state: the members typically hand it on right after
// (task.CatchUp).
func (c *Comm) Grow(ctx context.Context, peers []string, incarnations []uint32) (*Comm, error) {
	cfg, err := c.cfg.Grown(peers, incarnations)
	if err != nil {
		c.Close()
		return nil, err
	}
	return c.moveTo(ctx, "grow", cfg)
}

// GrowConfig is Grow without the join: it closes c and returns the Config
// with which this rank joins the bigger world, its Listener a duplicate
// of c's peer port, for a caller that joins itself (and may join again
// should the membership change meanwhile). The caller owns the listener.
func (c *Comm) GrowConfig(peers []string, incarnations []uint32) (Config, error) {
	cfg, err := c.cfg.Grown(peers, incarnations)
	if err != nil {
		c.Close()
		return Config{}, err
	}
	ln, err := c.keepListener()
	c.Close()
	if err != nil {
		return Config{}, fmt.Errorf("collective: grow rank %d: keep the peer port %s: %w", c.rank, c.cfg.Peers[c.rank], err)
	}
	cfg.Listener = ln
	return cfg, nil
}

// Grown returns the Config with which this rank joins the bigger world
// peers and incarnations describe. It fails when the world is not bigger,
// the incarnations do not sum to more than cfg's, or this rank's address
// is not at its own rank among peers (a member keeps its rank when the
// world grows). The listener is cfg's.
func (cfg Config) Grown(peers []string, incarnations []uint32) (Config, error) {
	if n := len(peers); n <= cfg.WorldSize {
		return Config{}, fmt.Errorf("collective: grow rank %d: %d addresses for a world of %d: the new world must be bigger", cfg.Rank, n, cfg.WorldSize)
	}
	if !slices.Equal(peers[:cfg.WorldSize], cfg.Peers) {
		return Config{}, fmt.Errorf("collective: grow rank %d: the new world's first %d addresses %v are not the old world's %v: members keep their ranks and newcomers come after them",
			cfg.Rank, cfg.WorldSize, peers[:cfg.WorldSize], cfg.Peers)
	}
	return cfg.resized("grow", peers, incarnations)
}
