package ps

// SlotHash is the hash a server's table places a key by: the top
// ShardBits bits pick the key's shard, the bits below them its home slot
// in that shard's index. A request whose keys are in SlotHash order
// therefore visits the shards one after another and each shard's slots
// in address order, so that its loads stream instead of landing at
// random (the client sorts large requests so: sortBits in its split).
//
// It is not the ring's hash (HashKey): a server holds only the keys of
// its arcs of the ring, and slots placed by that hash would crowd into
// those arcs.
func SlotHash(key uint64) uint64 {
	// MurmurHash3's finaliser: small or strided ids spread over the slots.
	return finalise(key, 33, 0xff51afd7ed558ccd, 33, 0xc4ceb9fe1a85ec53, 33)
}

// ShardBits is how many of SlotHash's top bits pick a key's shard in a
// server's table: 64 shards.
const ShardBits = 6

// SlotShard is the shard of a server's table that holds the key whose
// SlotHash is h: its top ShardBits bits.
func SlotShard(h uint64) int { return int(h >> (64 - ShardBits)) }
