package hdfstest

import (
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"google.golang.org/protobuf/proto"
)

// namenode holds the namespace, the block map and the datanode registry.
// One lock guards all of it, as in HDFS's FSNamesystem.
type namenode struct {
	blockKeys *blockKeys // nil: no block tokens
	stats     *counters  // nil outside a Cluster
	cfg       Config
	log       *slog.Logger
	poolID    string

	mu          sync.RWMutex
	root        *inode
	nextInode   uint64
	blocks      map[uint64]*block
	nextBlockID uint64
	nextGS      uint64
	datanodes   []*dnRecord
	leases      map[string]time.Time // client name -> last renewal
	placeCursor int
	deletes     []deletion // replicas to remove, sent to datanodes outside the lock
	dirty       bool       // the namespace changed since the last image save

	// invalidate asks datanode dn to delete replicas; set by the cluster.
	invalidate func(dn int, ids []uint64)
	// tokens issues and checks delegation tokens; nil on an insecure cluster.
	tokens *tokenManager
}

// block is one block of a file and the replicas datanodes reported.
type block struct {
	id       uint64
	gs       uint64
	numBytes int64
	file     *inode
	targets  []int            // the datanodes of its write pipeline
	replicas map[int]*replica // by datanode index
}

type replica struct {
	numBytes int64
	corrupt  bool
}

type deletion struct {
	dn int
	id uint64
}

// dnRecord is the namenode's view of one datanode.
type dnRecord struct {
	index     int
	id        *hadooppb.DatanodeIDProto
	storageID string
	alive     bool
	blocks    int
}

func newNamenode(cfg Config, log *slog.Logger, poolID string) *namenode {
	nn := &namenode{
		cfg:         cfg,
		log:         log,
		poolID:      poolID,
		blocks:      map[uint64]*block{},
		nextInode:   16384, // HDFS's first inode id
		nextBlockID: 1 << 30,
		nextGS:      1000,
		leases:      map[string]time.Time{},
	}
	nn.root = nn.newInode(nil, "", true, 0755, cfg.Superuser)
	if cfg.DataTransferProtection != "" {
		nn.blockKeys = newBlockKeys()
	}
	if cfg.TokenRenewInterval > 0 {
		nn.tokens = newTokenManager(cfg.TokenRenewInterval, cfg.TokenMaxLifetime)
	}
	return nn
}

// userFor returns the caller's identity with its groups.
func (nn *namenode) userFor(name string) *user {
	u := &user{name: name, super: name == nn.cfg.Superuser}
	if gs, ok := nn.cfg.Groups[name]; ok {
		u.groups = append(u.groups, gs...)
	} else {
		u.groups = []string{name}
	}
	if u.super {
		u.groups = append(u.groups, nn.cfg.Supergroup)
	}
	return u
}

// registerDatanode adds or revives datanode index.
func (nn *namenode) registerDatanode(index int, id *hadooppb.DatanodeIDProto, storageID string) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	for len(nn.datanodes) <= index {
		nn.datanodes = append(nn.datanodes, nil)
	}
	if r := nn.datanodes[index]; r != nil {
		r.id, r.alive = id, true
		return
	}
	nn.datanodes[index] = &dnRecord{index: index, id: id, storageID: storageID, alive: true}
}

// datanodeDied marks a datanode dead: it gets no reads and no new blocks.
func (nn *namenode) datanodeDied(index int) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	if index < len(nn.datanodes) && nn.datanodes[index] != nil {
		nn.datanodes[index].alive = false
	}
}

// reportedReplica is one replica in a block report.
type reportedReplica struct {
	id, gs   uint64
	numBytes int64
}

// blockReport records the finalized replicas a datanode holds and returns
// the ids of replicas it should delete (of blocks the namespace no longer has).
func (nn *namenode) blockReport(dn int, reps []reportedReplica) (stale []uint64) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	for _, r := range reps {
		if !nn.addReplicaLocked(dn, r) {
			stale = append(stale, r.id)
		}
	}
	return stale
}

// blockReceived records a newly finalized replica. It reports false when
// the block is unknown or stale, and the datanode should drop the replica.
func (nn *namenode) blockReceived(dn int, r reportedReplica) bool {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	return nn.addReplicaLocked(dn, r)
}

func (nn *namenode) addReplicaLocked(dn int, r reportedReplica) bool {
	b := nn.blocks[r.id]
	if b == nil || r.gs < b.gs {
		return false
	}
	if _, had := b.replicas[dn]; !had && dn < len(nn.datanodes) && nn.datanodes[dn] != nil {
		nn.datanodes[dn].blocks++
	}
	b.replicas[dn] = &replica{numBytes: r.numBytes}
	return true
}

// reportCorrupt marks datanode dn's replica of block id corrupt; reads stop
// going there.
func (nn *namenode) reportCorrupt(dn int, id uint64) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	if b := nn.blocks[id]; b != nil {
		if r := b.replicas[dn]; r != nil && !r.corrupt {
			r.corrupt = true
			nn.log.Warn("corrupt replica reported", "block", id, "datanode", dn)
		}
	}
}

// chooseTargets picks n live datanodes for a new block, fewest blocks
// first, skipping excluded ones.
func (nn *namenode) chooseTargets(n int, exclude map[string]bool) []int {
	var live []*dnRecord
	for _, d := range nn.datanodes {
		if d != nil && d.alive && !exclude[d.id.GetDatanodeUuid()] {
			live = append(live, d)
		}
	}
	nn.placeCursor++
	start := nn.placeCursor
	sort.SliceStable(live, func(i, j int) bool {
		if live[i].blocks != live[j].blocks {
			return live[i].blocks < live[j].blocks
		}
		k := len(nn.datanodes)
		return (live[i].index+k-start%k)%k < (live[j].index+k-start%k)%k
	})
	if n > len(live) {
		n = len(live)
	}
	out := make([]int, n)
	for i := range out {
		out[i] = live[i].index
	}
	return out
}

// readableReplicas returns the datanodes a block can be read from: live,
// not corrupt, rotated by block id so reads spread over the cluster. When
// every replica is corrupt it returns them all and corrupt true, as HDFS does.
func (nn *namenode) readableReplicas(b *block) (dns []int, corrupt bool) {
	var good, bad []int
	for dn, r := range b.replicas {
		if dn >= len(nn.datanodes) || nn.datanodes[dn] == nil || !nn.datanodes[dn].alive {
			continue
		}
		if r.corrupt {
			bad = append(bad, dn)
		} else {
			good = append(good, dn)
		}
	}
	k := len(nn.datanodes)
	rot := func(s []int) {
		sort.Slice(s, func(i, j int) bool {
			return (s[i]+int(b.id%uint64(k)))%k < (s[j]+int(b.id%uint64(k)))%k
		})
	}
	if len(good) == 0 && len(bad) > 0 {
		rot(bad)
		return bad, true
	}
	rot(good)
	return good, false
}

func (nn *namenode) datanodeInfo(dn int) *hadooppb.DatanodeInfoProto {
	d := nn.datanodes[dn]
	return &hadooppb.DatanodeInfoProto{
		Id:         d.id,
		Capacity:   proto.Uint64(1 << 40),
		Remaining:  proto.Uint64(1 << 40),
		LastUpdate: proto.Uint64(uint64(time.Now().UnixMilli())),
		AdminState: hadooppb.DatanodeInfoProto_NORMAL.Enum(),
	}
}

func (nn *namenode) extended(b *block) *hadooppb.ExtendedBlockProto {
	return &hadooppb.ExtendedBlockProto{
		PoolId:          proto.String(nn.poolID),
		BlockId:         proto.Uint64(b.id),
		GenerationStamp: proto.Uint64(b.gs),
		NumBytes:        proto.Uint64(uint64(b.numBytes)),
	}
}

// located describes block b at offset off with datanodes dns, with a
// block token for who, or an empty one when block tokens are off.
func (nn *namenode) located(b *block, off int64, dns []int, corrupt bool, who string, modes ...string) *hadooppb.LocatedBlockProto {
	tok := &hadooppb.TokenProto{Identifier: []byte{}, Password: []byte{}, Kind: proto.String(""), Service: proto.String("")}
	if nn.blockKeys != nil {
		tok = nn.blockKeys.token(nn.poolID, b.id, who, modes...)
	}
	lb := &hadooppb.LocatedBlockProto{
		B:          nn.extended(b),
		Offset:     proto.Uint64(uint64(off)),
		Corrupt:    proto.Bool(corrupt),
		BlockToken: tok,
	}
	for _, dn := range dns {
		lb.Locs = append(lb.Locs, nn.datanodeInfo(dn))
		lb.IsCached = append(lb.IsCached, false)
		lb.StorageTypes = append(lb.StorageTypes, hadooppb.StorageTypeProto_DISK)
		lb.StorageIDs = append(lb.StorageIDs, nn.datanodes[dn].storageID)
	}
	return lb
}

// removeBlocks drops the blocks of files leaving the namespace and queues
// the deletion of their replicas.
func (nn *namenode) removeBlocks(files []*inode) {
	for _, f := range files {
		for _, b := range f.blocks {
			delete(nn.blocks, b.id)
			for dn := range b.replicas {
				nn.deletes = append(nn.deletes, deletion{dn: dn, id: b.id})
				if dn < len(nn.datanodes) && nn.datanodes[dn] != nil {
					nn.datanodes[dn].blocks--
				}
			}
			// A replica being written has not been reported yet; its
			// datanode drops it when blockReceived says the block is gone.
		}
		f.blocks = nil
	}
}

// flushDeletes sends queued replica deletions to the datanodes. It must be
// called without nn.mu held.
func (nn *namenode) flushDeletes() {
	nn.mu.Lock()
	ds := nn.deletes
	nn.deletes = nil
	nn.mu.Unlock()
	if nn.invalidate == nil || len(ds) == 0 {
		return
	}
	byDN := map[int][]uint64{}
	for _, d := range ds {
		byDN[d.dn] = append(byDN[d.dn], d.id)
	}
	for dn, ids := range byDN {
		nn.invalidate(dn, ids)
	}
}

// fileStatus converts an inode to the wire form; name is the path field
// (the local name in listings, empty for getFileInfo).
func (nn *namenode) fileStatus(n *inode, name string) *hadooppb.HdfsFileStatusProto {
	st := &hadooppb.HdfsFileStatusProto{
		FileType:         hadooppb.HdfsFileStatusProto_IS_FILE.Enum(),
		Path:             []byte(name),
		Length:           proto.Uint64(0),
		Permission:       &hadooppb.FsPermissionProto{Perm: proto.Uint32(uint32(n.perm))},
		Owner:            proto.String(n.owner),
		Group:            proto.String(n.group),
		ModificationTime: proto.Uint64(uint64(n.mtime)),
		AccessTime:       proto.Uint64(uint64(n.atime)),
		FileId:           proto.Uint64(n.id),
	}
	if n.isDir {
		st.FileType = hadooppb.HdfsFileStatusProto_IS_DIR.Enum()
		st.ChildrenNum = proto.Int32(int32(len(n.children)))
		st.AccessTime = proto.Uint64(0)
	} else {
		st.Length = proto.Uint64(uint64(n.length()))
		st.BlockReplication = proto.Uint32(uint32(n.replication))
		st.Blocksize = proto.Uint64(uint64(n.blockSize))
		st.ChildrenNum = proto.Int32(0)
	}
	return st
}

// recoverLeaseLocked closes a file whose writer went away: blocks without a
// finalized replica are dropped and the last block takes the length its
// replicas reported.
func (nn *namenode) recoverLeaseLocked(f *inode) {
	var keep []*block
	for _, b := range f.blocks {
		var n int64 = -1
		for _, r := range b.replicas {
			if !r.corrupt && r.numBytes > n {
				n = r.numBytes
			}
		}
		if n < 0 {
			nn.removeBlocks([]*inode{{blocks: []*block{b}}})
			continue
		}
		b.numBytes = n
		keep = append(keep, b)
	}
	f.blocks = keep
	f.lease = ""
	nn.dirty = true
}
