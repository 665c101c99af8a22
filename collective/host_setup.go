package collective

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
)

// hostEligible reports whether cfg's group runs small allreduces and
// barriers on a host segment (host.go): every rank on one host, bytes
// between them through shared memory, and the choice of algorithm left
// to the default (Config.SmallBytes zero, no simulated hosts). Every rank
// holds the same configuration, so every rank decides alike; whether the
// segment can be mapped is agreed on by joinHost.
func hostEligible(cfg Config) bool {
	if cfg.WorldSize < 2 || cfg.RanksPerHost != 0 {
		return false
	}
	if cfg.hostSegment {
		return true
	}
	return cfg.SmallBytes == 0 && sharedMemoryLink(cfg) && oneHost(cfg.Peers)
}

// joinHost maps the group's host segment, or leaves c.host nil (the tree
// and the ring then run as before) when any rank cannot. Rank 0 draws a
// nonce and sends it down the binomial tree; every rank creates or opens
// the file named from the group's identity and that nonce (so a segment
// left behind by a rank killed in an earlier group, generation or
// incarnation is never reused), counts itself in, and the ranks agree, up
// and down the tree, that every one mapped it and that all mapped the
// same one. The rank that counts itself in last removes the file; the
// mappings keep it alive.
func (c *Comm) joinHost(ctx context.Context, m *Mesh) error {
	var nonce [16]byte
	if c.rank == 0 {
		if _, err := rand.Read(nonce[:]); err != nil {
			return fmt.Errorf("host segment nonce: %w", err)
		}
	}
	if err := c.treeShare(ctx, nonce[:]); err != nil {
		return fmt.Errorf("host segment nonce: %w", err)
	}
	path := hostSegmentPath(c.cfg, nonce)
	g := &hostGroup{rank: c.rank, world: c.world, mesh: m}
	mem, mapErr := mapHostSegment(path, hostSegmentBytes(c.world))
	if mapErr == nil {
		g.mem = mem
		joinLocal(path)
		if atomic.AddUint32(g.word32(hostOffAttached), 1) == uint32(c.world) {
			os.Remove(path)
		}
	}
	ok, err := c.treeAll(ctx, mapErr == nil)
	if err == nil && ok {
		// Ranks with /dev/shm of their own each mapped a file of their
		// own, in which not every rank counted itself in.
		ok, err = c.treeAll(ctx, atomic.LoadUint32(g.word32(hostOffAttached)) == uint32(c.world))
	}
	if err != nil || !ok {
		if g.mem != nil {
			leaveLocal(path)
			unmapShared(g.mem)
		}
		os.Remove(path)
		if err != nil {
			return fmt.Errorf("host segment %s: %w", path, err)
		}
		c.log.Debug("no host segment: not every rank could map it", "path", path, "err", mapErr)
		return nil
	}
	g.kids = make([][]int, c.world)
	for r := range c.world {
		g.kids[r] = treeChildren(r, c.world)
	}
	if allLocal(path, c.world) && !c.cfg.hostFutex {
		g.local = hostLocals.get(path)
	} else {
		leaveLocal(path)
	}
	g.path = path
	c.host = g
	m.onInterrupt(func() { futexWake(g.gen()) })
	return nil
}

// hostSegmentPath names the segment of cfg's group: its job, its
// membership (every rank's address and incarnation), its token and the
// nonce rank 0 drew for it, hashed.
func hostSegmentPath(cfg Config, nonce [16]byte) string {
	h := sha256.New()
	for _, s := range append([]string{cfg.JobID, cfg.Token}, cfg.Peers...) {
		h.Write(binary.AppendUvarint(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	for _, inc := range cfg.Incarnations {
		h.Write(binary.LittleEndian.AppendUint32(nil, inc))
	}
	h.Write(nonce[:])
	return filepath.Join(shmDir, fmt.Sprintf("spindle-host-%x", h.Sum(nil)[:16]))
}

// mapHostSegment creates or opens the segment file at path, sizes it to
// size bytes with every page allocated (a full /dev/shm refuses it here
// rather than with SIGBUS later) and maps it; zeros are its initial state.
func mapHostSegment(path string, size int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := reserve(f, size); err != nil {
		return nil, err
	}
	return mapShared(f, size)
}

// treeShare copies rank 0's buf to every rank, down the binomial tree.
func (c *Comm) treeShare(ctx context.Context, buf []byte) error {
	if c.rank != 0 {
		if err := c.t.Recv(ctx, treeParent(c.rank), buf); err != nil {
			return err
		}
	}
	for _, kid := range treeChildren(c.rank, c.world) {
		if err := c.t.Send(ctx, kid, buf); err != nil {
			return err
		}
	}
	return nil
}

// treeAll returns on every rank whether ok holds on every rank: up the
// binomial tree and back down.
func (c *Comm) treeAll(ctx context.Context, ok bool) (bool, error) {
	b := []byte{0}
	if ok {
		b[0] = 1
	}
	in := []byte{0}
	for _, kid := range treeChildren(c.rank, c.world) {
		if err := c.t.Recv(ctx, kid, in); err != nil {
			return false, err
		}
		b[0] &= in[0]
	}
	if c.rank != 0 {
		if err := c.t.Send(ctx, treeParent(c.rank), b); err != nil {
			return false, err
		}
	}
	if err := c.treeShare(ctx, b); err != nil {
		return false, err
	}
	return b[0] == 1, nil
}

// closeHost unmaps the segment; called with c.mu held, so that no
// operation still reads it.
func (c *Comm) closeHost() {
	if c.host != nil && c.host.mem != nil {
		if c.host.local != nil {
			leaveLocal(c.host.path)
		}
		unmapShared(c.host.mem)
		c.host.mem = nil
	}
}
