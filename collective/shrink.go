package collective

import (
	"context"
	"fmt"
	"slices"
)

// Shrink replaces this communicator, once it has failed because a peer was
// lost (see LostRank), with one of a smaller world formed by the same
// processes: the survivors keep their processes and their peer ports, and
// are renumbered. peers gives the new world's addresses in its rank order
// and must hold this rank's own address, whose index is its new rank; every
// survivor calls Shrink with the same peers and incarnations.
//
// incarnations must sum to more than the old communicator's (the
// membership epoch grows): a process of the old world that is still alive,
// a lost rank that was only cut off, is then refused with ErrReplaced, and
// a survivor that has not shrunk yet asks the others to wait for it.
// Shrink waits up to Config.ConnectTimeout for the others, like New.
//
// Shrink closes c, whether it succeeds or not, so no operation may be in
// flight on c. The ranks' data do not survive: the survivors typically
// agree on their step and model state right after (task.CatchUp).
func (c *Comm) Shrink(ctx context.Context, peers []string, incarnations []uint32) (*Comm, error) {
	cfg, err := c.shrunkConfig(peers, incarnations)
	if err != nil {
		c.Close()
		return nil, err
	}
	return c.moveTo(ctx, "shrink", cfg)
}

// moveTo closes c and joins the world cfg describes over c's peer port
// (what names the change in errors and logs).
func (c *Comm) moveTo(ctx context.Context, what string, cfg Config) (*Comm, error) {
	ln, err := c.keepListener()
	c.Close()
	if err != nil {
		return nil, fmt.Errorf("collective: %s rank %d: keep the peer port %s: %w", what, c.rank, c.cfg.Peers[c.rank], err)
	}
	cfg.Listener = ln
	c.log.Info("moving to a new world", "change", what, "old_rank", c.rank, "rank", cfg.Rank, "world_size", cfg.WorldSize,
		"peers", cfg.Peers, "incarnations", cfg.Incarnations)
	return New(ctx, cfg)
}

// shrunkConfig checks a smaller world's membership against c's and returns
// the Config that joins it.
func (c *Comm) shrunkConfig(peers []string, incarnations []uint32) (Config, error) {
	return c.cfg.Shrunk(peers, incarnations)
}

// Shrunk returns the Config with which this rank joins the smaller world
// peers and incarnations describe (an elastic job's survivors going on
// without a lost rank): its rank is the index of its own address among
// peers. It fails when the world is not smaller, the incarnations do not
// sum to more than cfg's (a process of the old world could join), or this
// rank's address is not among peers. The listener is cfg's.
func (cfg Config) Shrunk(peers []string, incarnations []uint32) (Config, error) {
	if n := len(peers); n == 0 || n >= cfg.WorldSize {
		return Config{}, fmt.Errorf("collective: shrink rank %d: %d addresses for a world of %d: the new world must be smaller and not empty", cfg.Rank, n, cfg.WorldSize)
	}
	return cfg.resized("shrink", peers, incarnations)
}

// resized returns cfg moved to the world peers and incarnations describe,
// this rank at the index of its own address, once the sizes were checked
// by the caller (what names the change in errors).
func (cfg Config) resized(what string, peers []string, incarnations []uint32) (Config, error) {
	n := len(peers)
	switch {
	case len(incarnations) != n:
		return Config{}, fmt.Errorf("collective: %s rank %d: %d incarnations for %d addresses: need one per rank", what, cfg.Rank, len(incarnations), n)
	case epochOf(incarnations) <= epochOf(cfg.Incarnations):
		return Config{}, fmt.Errorf("collective: %s rank %d: incarnations %v do not sum to more than the old world's %v: a process of the old world could join",
			what, cfg.Rank, incarnations, cfg.Incarnations)
	}
	rank := slices.Index(peers, cfg.Peers[cfg.Rank])
	if rank < 0 {
		return Config{}, fmt.Errorf("collective: %s rank %d: its address %s is not among the new world's %v: a survivor keeps its peer port",
			what, cfg.Rank, cfg.Peers[cfg.Rank], peers)
	}
	cfg.Rank, cfg.WorldSize = rank, n
	cfg.Peers = slices.Clone(peers)
	cfg.Incarnations = slices.Clone(incarnations)
	if cfg.RanksPerHost > 0 && n%cfg.RanksPerHost != 0 {
		// The hosts no longer hold equal numbers of ranks.
		cfg.RanksPerHost = HostsFromPeers
	}
	return cfg, nil
}

// epochOf numbers a membership: the sum of its incarnations.
func epochOf(incarnations []uint32) uint32 {
	var e uint32
	for _, inc := range incarnations {
		e += inc
	}
	return e
}
