package ps

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"

	"github.com/zeebo/xxh3"

	"github.com/spindle-ml/spindle/ps/pspb"
)

// Purpose is what the job's peer token proves on a parameter-server
// connection (internal/peercred): a proof made for the collectives or
// anything else does not open it.
const Purpose = "spindle-ps"

// DefaultVirtualNodes is how many points each server has on the ring: with
// 128, the busiest of 4 servers holds within a few percent of a quarter of
// the keys.
const DefaultVirtualNodes = 128

// Ring places keys on servers by consistent hashing: each server owns the
// arcs ending at its virtual nodes, so a server's leaving moves only its
// own keys, to the servers after it. A Ring is immutable; its Version
// changes whenever its servers do, and servers refuse requests routed by
// another version.
type Ring struct {
	version uint64
	servers []string
	vnodes  int
	points  []uint64 // sorted hashes of the virtual nodes
	owners  []int32  // owners[i] is the server of points[i]
	// jump[b] is the first point whose top bits bits are ≥ b: Owner
	// starts there and steps over a few points instead of searching all.
	jump []int32
	bits uint8
	// dead marks the servers taken out of the ring: their arcs fall to the
	// next live server, which held their replicas.
	dead []bool
}

// jumpBits sizes the jump table of a ring of n points: about four
// entries per point, so that Owner steps over well under one point on
// average, and no more. Every client routes each key and every server
// checks it, so the table must stay in the nearest caches: 2^16 entries
// (256 KiB) for the 128 points of one server were cache misses in their
// own right.
func jumpBits(n int) uint8 {
	return uint8(min(max(log2Ceil(n)+2, 4), 16))
}

func log2Ceil(n int) int {
	l := 0
	for 1<<l < n {
		l++
	}
	return l
}

// NewRing builds version version of the ring of servers (their addresses,
// by server index) with vnodes virtual nodes each (DefaultVirtualNodes
// when 0).
func NewRing(version uint64, servers []string, vnodes int) (*Ring, error) {
	if len(servers) == 0 {
		return nil, fmt.Errorf("ps: a ring needs at least one server")
	}
	if vnodes <= 0 {
		vnodes = DefaultVirtualNodes
	}
	r := &Ring{version: version, servers: slices.Clone(servers), vnodes: vnodes, dead: make([]bool, len(servers))}
	type point struct {
		h     uint64
		owner int32
	}
	pts := make([]point, 0, len(servers)*vnodes)
	var buf [12]byte
	for s := range servers {
		for v := range vnodes {
			// A server's points depend on its index, not its address: a
			// replacement on another host takes over the same arcs.
			binary.LittleEndian.PutUint32(buf[0:], uint32(s))
			binary.LittleEndian.PutUint64(buf[4:], uint64(v))
			pts = append(pts, point{h: xxh3.Hash(buf[:]), owner: int32(s)})
		}
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].h < pts[j].h })
	r.points = make([]uint64, len(pts))
	r.owners = make([]int32, len(pts))
	for i, p := range pts {
		r.points[i], r.owners[i] = p.h, p.owner
	}
	r.bits = jumpBits(len(r.points))
	r.jump = make([]int32, 1<<r.bits+1)
	i := 0
	for b := range 1 << r.bits {
		for i < len(r.points) && r.points[i]>>(64-r.bits) < uint64(b) {
			i++
		}
		r.jump[b] = int32(i)
	}
	r.jump[1<<r.bits] = int32(len(r.points))
	return r, nil
}

// WithDead returns version version of the ring with the servers dead
// taken out (on top of those already out). The points stay: a dead
// server's arcs fall to the live servers after it.
func (r *Ring) WithDead(version uint64, dead ...int) (*Ring, error) {
	out := *r
	out.version = version
	out.dead = slices.Clone(r.dead)
	for _, d := range dead {
		if d < 0 || d >= len(r.servers) {
			return nil, fmt.Errorf("ps: no server %d in a ring of %d", d, len(r.servers))
		}
		out.dead[d] = true
	}
	if out.Live() == 0 {
		return nil, fmt.Errorf("ps: every server of the ring is dead")
	}
	return &out, nil
}

// WithRejoined returns version version of the ring with server s back in
// it, now at addr: a replacement for a dead server takes over its index,
// and so its arcs and ranges.
func (r *Ring) WithRejoined(version uint64, s int, addr string) (*Ring, error) {
	if s < 0 || s >= len(r.servers) {
		return nil, fmt.Errorf("ps: no server %d in a ring of %d", s, len(r.servers))
	}
	if addr == "" {
		return nil, fmt.Errorf("ps: server %d rejoins without an address", s)
	}
	out := *r
	out.version = version
	out.dead = slices.Clone(r.dead)
	out.servers = slices.Clone(r.servers)
	out.dead[s], out.servers[s] = false, addr
	return &out, nil
}

// Dead says whether server s is out of the ring.
func (r *Ring) Dead(s int) bool { return r.dead[s] }

// DeadServers lists the servers out of the ring.
func (r *Ring) DeadServers() []int {
	var out []int
	for s, d := range r.dead {
		if d {
			out = append(out, s)
		}
	}
	return out
}

// Sole returns the only live server of the ring, or -1 when there are
// several: it owns every key, and no key needs routing.
func (r *Ring) Sole() int {
	sole := -1
	for s, d := range r.dead {
		if d {
			continue
		}
		if sole >= 0 {
			return -1
		}
		sole = s
	}
	return sole
}

// Live is the number of servers in the ring.
func (r *Ring) Live() int {
	n := 0
	for _, d := range r.dead {
		if !d {
			n++
		}
	}
	return n
}

// Version is the ring's version.
func (r *Ring) Version() uint64 { return r.version }

// Servers returns the servers' addresses, by server index.
func (r *Ring) Servers() []string { return slices.Clone(r.servers) }

// VirtualNodes is the number of points each server has.
func (r *Ring) VirtualNodes() int { return r.vnodes }

// HashKey spreads a key over the ring: feature ids are often small or
// sequential, and the ring needs them uniform.
func HashKey(key uint64) uint64 {
	// splitmix64's finaliser: a bijection, cheap, and well mixed.
	return finalise(key, 30, 0xbf58476d1ce4e5b9, 27, 0x94d049bb133111eb, 31)
}

// finalise mixes key's bits in xor-shift-multiply rounds (the shape of
// splitmix64's and MurmurHash3's finalisers, which differ in their
// constants): a bijection in which every output bit depends on every
// input bit.
func finalise(key uint64, s1 uint, m1 uint64, s2 uint, m2 uint64, s3 uint) uint64 {
	key ^= key >> s1
	key *= m1
	key ^= key >> s2
	key *= m2
	key ^= key >> s3
	return key
}

// Owner returns the index of the server that holds key.
func (r *Ring) Owner(key uint64) int {
	return int(r.owners[r.ownerPoint(key)])
}

// ownerPoint returns the index of the point that owns key: the first
// point of a live server at or after the key's hash.
func (r *Ring) ownerPoint(key uint64) int {
	h := HashKey(key)
	i := int(r.jump[h>>(64-r.bits)])
	for i < len(r.points) && r.points[i] < h {
		i++
	}
	if i == len(r.points) {
		i = 0
	}
	for r.dead[r.owners[i]] {
		i = (i + 1) % len(r.points)
	}
	return i
}

// Replicas appends to dst the servers that hold key: its owner, then
// up to n backups, the next distinct live servers on the ring.
func (r *Ring) Replicas(dst []int, key uint64, n int) []int {
	i := r.ownerPoint(key)
	dst = append(dst, int(r.owners[i]))
	want := min(n+1, r.Live())
	for j := 1; len(dst) < want && j < len(r.points); j++ {
		s := int(r.owners[(i+j)%len(r.points)])
		if !r.dead[s] && !slices.Contains(dst, s) {
			dst = append(dst, s)
		}
	}
	return dst
}

// Holders appends to dst the servers that hold key of a table: for a
// sparse table (rows 0) its owner and backups on the ring, as Replicas; for
// a dense table of rows rows, the server of its range (RangeOwner over
// every server, dead or alive) or, when that one is dead, the next live
// server by index, then up to n backups, the live servers after it by
// index. A dead server's range thus falls to its first backup, which has
// the rows.
func (r *Ring) Holders(dst []int, key, rows uint64, n int) []int {
	if rows == 0 {
		return r.Replicas(dst, key, n)
	}
	first := RangeOwner(key, rows, len(r.servers))
	want := len(dst) + min(n+1, r.Live())
	for j := 0; len(dst) < want && j < len(r.servers); j++ {
		if s := (first + j) % len(r.servers); !r.dead[s] {
			dst = append(dst, s)
		}
	}
	return dst
}

// OwnerOf returns the server that owns key of a table with rows dense rows
// (0: a sparse table): the first of its Holders.
func (r *Ring) OwnerOf(key, rows uint64) int {
	if rows == 0 {
		return r.Owner(key)
	}
	first := RangeOwner(key, rows, len(r.servers))
	for j := range len(r.servers) {
		if s := (first + j) % len(r.servers); !r.dead[s] {
			return s
		}
	}
	return first // unreachable: a ring keeps one live server
}

// HashString turns a string feature into a key, for clients whose
// features are names ("country=fr") rather than ids.
func HashString(s string) uint64 { return xxh3.HashString(s) }

// RangeOwner returns the server of row key of a dense table of rows rows,
// split in contiguous ranges over n servers.
func RangeOwner(key, rows uint64, n int) int {
	if rows == 0 || key >= rows {
		return int(key % uint64(n))
	}
	return int(key * uint64(n) / rows)
}

// RingFromInfo builds the ring info describes.
func RingFromInfo(info *pspb.RingInfo) (*Ring, error) {
	r, err := NewRing(info.Version, info.Servers, int(info.VirtualNodes))
	if err != nil || len(info.Dead) == 0 {
		return r, err
	}
	dead := make([]int, len(info.Dead))
	for i, d := range info.Dead {
		dead[i] = int(d)
	}
	return r.WithDead(info.Version, dead...)
}
