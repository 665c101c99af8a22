package hdfstest

import (
	"path"
	"time"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
)

// The namespace operations behind the ClientProtocol methods. Each runs
// with nn.mu held (read-only ones under the read lock) and follows the
// HDFS semantics colinmarc/hdfs and the Java client expect, errors included.

// fileLocked returns the file at p for a write-path call by client, checking
// the lease (and fileID when the client sent one).
func (nn *namenode) fileLocked(u *user, p, client string, fileID uint64) (*inode, error) {
	w, err := nn.resolve(u, p)
	if err != nil {
		return nil, err
	}
	f := w.target()
	if f == nil || f.isDir || (fileID != 0 && f.id != fileID) {
		return nil, remoteErr(classFileNotFound, "File does not exist: %s [Lease. Holder: %s]", p, client)
	}
	if f.lease != client {
		return nil, remoteErr(classLeaseExpired, "No lease on %s: File is not open for writing. Holder %s does not have any open files.", p, client)
	}
	return f, nil
}

func (nn *namenode) getBlockLocationsLocked(u *user, p string, off, length int64) (*hadooppb.LocatedBlocksProto, error) {
	w, err := nn.resolve(u, p)
	if err != nil {
		return nil, err
	}
	f := w.target()
	if f == nil {
		return nil, errNotFound(p)
	}
	if f.isDir {
		return nil, remoteErr(classFileNotFound, "Path is not a file: %s", p)
	}
	if err := u.check(f, accessRead); err != nil {
		return nil, err
	}
	if off < 0 || length < 0 {
		return nil, remoteErr(classIllegalArgument, "Negative offset or length: offset=%d, length=%d", off, length)
	}
	lbs := &hadooppb.LocatedBlocksProto{
		FileLength:          uint64ptr(f.length()),
		UnderConstruction:   boolptr(f.underConstruction()),
		IsLastBlockComplete: boolptr(!f.underConstruction()),
	}
	var pos int64
	for _, b := range f.blocks {
		end := pos + b.numBytes
		if end > off && pos < off+length || (b.numBytes == 0 && pos >= off && pos <= off+length) {
			dns, corrupt := nn.readableReplicas(b)
			lbs.Blocks = append(lbs.Blocks, nn.located(b, pos, dns, corrupt, u.name, modeRead))
		}
		pos = end
	}
	if n := len(f.blocks); n > 0 {
		b := f.blocks[n-1]
		dns, corrupt := nn.readableReplicas(b)
		lbs.LastBlock = nn.located(b, pos-b.numBytes, dns, corrupt, u.name, modeRead)
	}
	return lbs, nil
}

func (nn *namenode) createLocked(u *user, req *hadooppb.CreateRequestProto) (*inode, error) {
	p, client := req.GetSrc(), req.GetClientName()
	w, err := nn.resolve(u, p)
	if err != nil {
		return nil, err
	}
	if len(w.names) == 0 {
		return nil, remoteErr(classFileAlreadyExists, "/ already exists as a directory")
	}
	repl := int(req.GetReplication())
	if repl < 1 || repl > 512 {
		return nil, remoteErr(classIOException, "Requested replication factor of %d is out of range [1, 512] for %s", repl, p)
	}
	bs := int64(req.GetBlockSize())
	if bs < int64(nn.cfg.BytesPerChecksum) || bs%int64(nn.cfg.BytesPerChecksum) != 0 {
		return nil, remoteErr(classIOException, "Block size %d for %s is not a positive multiple of bytes per checksum %d", bs, p, nn.cfg.BytesPerChecksum)
	}
	flag := req.GetCreateFlag()
	if flag&uint32(hadooppb.CreateFlagProto_APPEND) != 0 {
		return nil, remoteErr(classIOException, "append is not supported by this namenode: %s", p)
	}
	parent := w.parent()
	if parent == nil {
		if !req.GetCreateParent() {
			return nil, remoteErr(classFileNotFound, "Parent directory doesn't exist: %s", path.Dir(w.path))
		}
		if parent, err = nn.mkdirsLocked(u, path.Dir(w.path), 0755|0300, true); err != nil {
			return nil, err
		}
	}
	if !parent.isDir {
		return nil, remoteErr(classParentNotDirectory, "Parent path is not a directory: %s", parent.path())
	}
	if err := u.check(parent, accessWrite); err != nil {
		return nil, err
	}
	if old := w.target(); old != nil {
		if old.isDir {
			return nil, remoteErr(classFileAlreadyExists, "%s already exists as a directory", p)
		}
		if old.underConstruction() {
			last := nn.leases[old.lease]
			if old.lease == client || time.Since(last) < nn.cfg.LeaseTimeout {
				return nil, remoteErr(classAlreadyBeingCreated,
					"Failed to CREATE_FILE %s for %s because this file lease is currently owned by %s", p, client, old.lease)
			}
			nn.recoverLeaseLocked(old)
		}
		if flag&uint32(hadooppb.CreateFlagProto_OVERWRITE) == 0 {
			return nil, remoteErr(classFileAlreadyExists, "%s for client %s already exists", p, client)
		}
		if err := u.checkSticky(parent, old); err != nil {
			return nil, err
		}
		nn.removeBlocks([]*inode{old})
		unlink(old)
	}
	f := nn.newInode(parent, w.names[len(w.names)-1], false, uint16(req.GetMasked().GetPerm())&0777, u.name)
	f.replication, f.blockSize, f.lease = repl, bs, client
	link(parent, f)
	nn.leases[client] = time.Now()
	nn.dirty = true
	return f, nil
}

func (nn *namenode) addBlockLocked(u *user, req *hadooppb.AddBlockRequestProto) (*block, int64, error) {
	f, err := nn.fileLocked(u, req.GetSrc(), req.GetClientName(), req.GetFileId())
	if err != nil {
		return nil, 0, err
	}
	if prev := req.GetPrevious(); prev != nil {
		if len(f.blocks) == 0 || f.blocks[len(f.blocks)-1].id != prev.GetBlockId() {
			return nil, 0, remoteErr(classIOException, "addBlock %s: previous block blk_%d is not the file's last block", req.GetSrc(), prev.GetBlockId())
		}
		last := f.blocks[len(f.blocks)-1]
		last.numBytes = int64(prev.GetNumBytes())
		if !minimallyReplicated(last) {
			return nil, 0, remoteErr(classNotReplicatedYet, "Not replicated yet: %s", req.GetSrc())
		}
	} else if len(f.blocks) > 0 {
		return nil, 0, remoteErr(classIOException, "addBlock %s: the previous block is missing from the request", req.GetSrc())
	}
	exclude := map[string]bool{}
	for _, d := range req.GetExcludeNodes() {
		exclude[d.GetId().GetDatanodeUuid()] = true
	}
	targets := nn.chooseTargets(f.replication, exclude)
	if len(targets) == 0 {
		alive := 0
		for _, d := range nn.datanodes {
			if d != nil && d.alive {
				alive++
			}
		}
		return nil, 0, remoteErr(classIOException,
			"File %s could only be written to 0 of the 1 minReplication nodes. There are %d datanode(s) running and %d node(s) are excluded in this operation.",
			req.GetSrc(), alive, len(exclude))
	}
	nn.nextBlockID++
	nn.nextGS++
	b := &block{id: nn.nextBlockID, gs: nn.nextGS, file: f, targets: targets, replicas: map[int]*replica{}}
	off := f.length()
	f.blocks = append(f.blocks, b)
	nn.blocks[b.id] = b
	nn.dirty = true
	return b, off, nil
}

func minimallyReplicated(b *block) bool {
	for _, r := range b.replicas {
		if !r.corrupt && r.numBytes == b.numBytes {
			return true
		}
	}
	return false
}

func (nn *namenode) completeLocked(u *user, req *hadooppb.CompleteRequestProto) (bool, error) {
	p, client := req.GetSrc(), req.GetClientName()
	w, err := nn.resolve(u, p)
	if err != nil {
		return false, err
	}
	if f := w.target(); f != nil && !f.isDir && !f.underConstruction() {
		// A retried complete of a file already closed.
		if n := len(f.blocks); n > 0 && req.GetLast() != nil && f.blocks[n-1].id == req.GetLast().GetBlockId() {
			return true, nil
		}
	}
	f, err := nn.fileLocked(u, p, client, req.GetFileId())
	if err != nil {
		return false, err
	}
	if last := req.GetLast(); last != nil {
		if len(f.blocks) == 0 || f.blocks[len(f.blocks)-1].id != last.GetBlockId() {
			return false, remoteErr(classIOException, "complete %s: block blk_%d is not the file's last block", p, last.GetBlockId())
		}
		f.blocks[len(f.blocks)-1].numBytes = int64(last.GetNumBytes())
	}
	for _, b := range f.blocks {
		if !minimallyReplicated(b) {
			return false, nil
		}
	}
	f.lease = ""
	f.mtime = time.Now().UnixMilli()
	nn.dirty = true
	return true, nil
}

func (nn *namenode) updateBlockForPipelineLocked(req *hadooppb.UpdateBlockForPipelineRequestProto) (*hadooppb.LocatedBlockProto, error) {
	eb := req.GetBlock()
	b := nn.blocks[eb.GetBlockId()]
	if b == nil {
		return nil, remoteErr(classIOException, "updateBlockForPipeline: unknown block blk_%d", eb.GetBlockId())
	}
	if b.file.lease != req.GetClientName() {
		return nil, remoteErr(classLeaseExpired, "updateBlockForPipeline: %s holds no lease on %s", req.GetClientName(), b.file.path())
	}
	if eb.NumBytes != nil {
		b.numBytes = int64(eb.GetNumBytes())
	}
	var off int64
	for _, x := range b.file.blocks {
		if x == b {
			break
		}
		off += x.numBytes
	}
	return nn.located(b, off, b.targets, false, b.file.lease, modeWrite), nil
}

func (nn *namenode) abandonBlockLocked(u *user, req *hadooppb.AbandonBlockRequestProto) error {
	f, err := nn.fileLocked(u, req.GetSrc(), req.GetHolder(), req.GetFileId())
	if err != nil {
		return err
	}
	n := len(f.blocks)
	if n == 0 || f.blocks[n-1].id != req.GetB().GetBlockId() {
		return nil
	}
	last := f.blocks[n-1]
	nn.removeBlocks([]*inode{{blocks: []*block{last}}})
	f.blocks = f.blocks[:n-1]
	nn.dirty = true
	return nil
}

// mkdirsLocked creates p (and its parents when parents is set) and
// returns it.
func (nn *namenode) mkdirsLocked(u *user, p string, perm uint16, parents bool) (*inode, error) {
	w, err := nn.resolve(u, p)
	if err != nil {
		return nil, err
	}
	if t := w.target(); t != nil {
		if !t.isDir {
			return nil, remoteErr(classFileAlreadyExists, "Path is not a directory: %s", p)
		}
		return t, nil
	}
	cur := w.lastExisting()
	if !cur.isDir {
		return nil, remoteErr(classParentNotDirectory, "Parent path is not a directory: %s", cur.path())
	}
	if w.parent() == nil && !parents {
		return nil, remoteErr(classFileNotFound, "Parent directory doesn't exist: %s", path.Dir(w.path))
	}
	if err := u.check(cur, accessWrite); err != nil {
		return nil, err
	}
	depth := 0
	for depth < len(w.nodes) && w.nodes[depth] != nil {
		depth++
	}
	for i := depth; i < len(w.nodes); i++ {
		mode := perm | 0300 // parents stay writable and searchable by their creator
		if i == len(w.nodes)-1 {
			mode = perm
		}
		d := nn.newInode(cur, w.names[i-1], true, mode&01777, u.name)
		link(cur, d)
		cur = d
	}
	nn.dirty = true
	return cur, nil
}

func (nn *namenode) deleteLocked(u *user, p string, recursive bool) (bool, error) {
	w, err := nn.resolve(u, p)
	if err != nil {
		return false, err
	}
	t := w.target()
	if t == nil || t.parent == nil {
		return false, nil
	}
	if err := u.check(t.parent, accessWrite|accessExecute); err != nil {
		return false, err
	}
	if err := u.checkSticky(t.parent, t); err != nil {
		return false, err
	}
	if t.isDir && len(t.children) > 0 {
		if !recursive {
			return false, remoteErr(classPathIsNotEmptyDir, "`%s is non empty': Directory is not empty", p)
		}
		if err := u.checkSubtree(t, accessAll); err != nil {
			return false, err
		}
	}
	nn.removeBlocks(subtreeFiles(t))
	unlink(t)
	nn.dirty = true
	return true, nil
}

// rename2Locked moves src to dst with HDFS's Rename2 semantics: dst's parent
// must exist, an existing dst is replaced only when overwrite is set and it
// is a file or an empty directory of the same kind.
func (nn *namenode) rename2Locked(u *user, src, dst string, overwrite bool) error {
	sw, err := nn.resolve(u, src)
	if err != nil {
		return err
	}
	s := sw.target()
	if s == nil {
		return remoteErr(classFileNotFound, "rename source %s is not found.", src)
	}
	if s.parent == nil {
		return remoteErr(classIOException, "rename source cannot be the root")
	}
	dw, err := nn.resolve(u, dst)
	if err != nil {
		return err
	}
	if sw.path == dw.path {
		return remoteErr(classFileAlreadyExists, "The source %s and destination %s are the same", src, dst)
	}
	dp := dw.parent()
	if len(dw.names) > 0 && dp == nil {
		return remoteErr(classFileNotFound, "rename destination parent %s not found.", path.Dir(dw.path))
	}
	if dp == nil {
		return remoteErr(classFileAlreadyExists, "rename destination / already exists")
	}
	if s.isAncestorOf(dp) {
		return remoteErr(classIOException, "Rename destination %s is a directory or file under source %s", dst, src)
	}
	if !dp.isDir {
		return remoteErr(classParentNotDirectory, "rename destination parent %s is a file.", dp.path())
	}
	if err := u.check(s.parent, accessWrite|accessExecute); err != nil {
		return err
	}
	if err := u.checkSticky(s.parent, s); err != nil {
		return err
	}
	if err := u.check(dp, accessWrite|accessExecute); err != nil {
		return err
	}
	if d := dw.target(); d != nil {
		if !overwrite {
			return remoteErr(classFileAlreadyExists, "rename destination %s already exists", dst)
		}
		if d.isDir != s.isDir {
			return remoteErr(classIOException, "Source %s and destination %s must both be directories or both be files", src, dst)
		}
		if d.isDir && len(d.children) > 0 {
			return remoteErr(classIOException, "rename destination directory is not empty: %s", dst)
		}
		if err := u.checkSticky(dp, d); err != nil {
			return err
		}
		nn.removeBlocks(subtreeFiles(d))
		unlink(d)
	}
	unlink(s)
	s.name = dw.names[len(dw.names)-1]
	link(dp, s)
	nn.dirty = true
	return nil
}

// renameLocked is the old rename: false instead of most errors, and a
// destination directory receives the source.
func (nn *namenode) renameLocked(u *user, src, dst string) (bool, error) {
	dw, err := nn.resolve(u, dst)
	if err != nil {
		return false, err
	}
	if d := dw.target(); d != nil && d.isDir {
		dst = path.Join(dw.path, path.Base(src))
	} else if d != nil {
		return false, nil
	}
	err = nn.rename2Locked(u, src, dst, false)
	if err == nil {
		return true, nil
	}
	switch classOf(err) {
	case classFileNotFound, classFileAlreadyExists, classParentNotDirectory:
		return false, nil
	}
	return false, err
}

func (nn *namenode) setPermissionLocked(u *user, p string, perm uint16) error {
	t, err := nn.ownedLocked(u, p)
	if err != nil {
		return err
	}
	t.perm = perm & 01777
	nn.dirty = true
	return nil
}

func (nn *namenode) setOwnerLocked(u *user, p, owner, group string) error {
	t, err := nn.ownedLocked(u, p)
	if err != nil {
		return err
	}
	if owner != "" && owner != t.owner && !u.super {
		return remoteErr(classAccessControl, "User %s is not a super user (non-super user cannot change owner).", u.name)
	}
	if group != "" && !u.super && !u.inGroup(group) {
		return remoteErr(classAccessControl, "User %s does not belong to %s", u.name, group)
	}
	if owner != "" {
		t.owner = owner
	}
	if group != "" {
		t.group = group
	}
	nn.dirty = true
	return nil
}

// ownedLocked returns the inode at p when u owns it (or is the superuser).
func (nn *namenode) ownedLocked(u *user, p string) (*inode, error) {
	w, err := nn.resolve(u, p)
	if err != nil {
		return nil, err
	}
	t := w.target()
	if t == nil {
		return nil, errNotFound(p)
	}
	if !u.super && u.name != t.owner {
		return nil, remoteErr(classAccessControl, "Permission denied. user=%s is not the owner of inode=%s", u.name, p)
	}
	return t, nil
}

func (nn *namenode) setTimesLocked(u *user, p string, mtime, atime int64) error {
	w, err := nn.resolve(u, p)
	if err != nil {
		return err
	}
	t := w.target()
	if t == nil {
		return errNotFound(p)
	}
	if err := u.check(t, accessWrite); err != nil {
		return err
	}
	if mtime >= 0 {
		t.mtime = mtime
	}
	if atime >= 0 {
		t.atime = atime
	}
	nn.dirty = true
	return nil
}

func uint64ptr(v int64) *uint64 { x := uint64(v); return &x }
func boolptr(v bool) *bool      { return &v }
