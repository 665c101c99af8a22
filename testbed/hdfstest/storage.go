package hdfstest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
)

// A datanode keeps each replica as two files, as HDFS does: blk_<id> holds
// the bytes and blk_<id>_<genstamp>.meta the chunk checksums after a 7-byte
// header (version uint16, checksum type byte, bytes per checksum uint32, all
// big-endian). Replicas being written live under rbw/ and move to
// finalized/ when their last packet arrives.

const (
	metaVersion   = 1
	metaHeaderLen = 7
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errReplicaNotFound reports a block the datanode does not hold.
var errReplicaNotFound = errors.New("replica not found")

// store holds one datanode's replicas.
type store struct {
	dir string

	mu        sync.Mutex
	finalized map[uint64]*replicaFile
}

// replicaFile is a finalized replica.
type replicaFile struct {
	id, gs uint64
	length int64
	ctype  hadooppb.ChecksumTypeProto
	bpc    int
	data   string
	meta   string
}

func openStore(dir string) (*store, error) {
	s := &store{dir: dir, finalized: map[uint64]*replicaFile{}}
	// Replicas left mid-write by a crash are dropped; their writers failed.
	if err := os.RemoveAll(filepath.Join(dir, "rbw")); err != nil {
		return nil, fmt.Errorf("clear %s: %w", filepath.Join(dir, "rbw"), err)
	}
	for _, sub := range []string{"rbw", "finalized"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, fmt.Errorf("create datanode storage: %w", err)
		}
	}
	ents, err := os.ReadDir(filepath.Join(dir, "finalized"))
	if err != nil {
		return nil, fmt.Errorf("scan datanode storage: %w", err)
	}
	for _, e := range ents {
		id, gs, ok := parseMetaName(e.Name())
		if !ok {
			continue
		}
		r, err := s.loadReplica(id, gs)
		if err != nil {
			return nil, err
		}
		s.finalized[id] = r
	}
	return s, nil
}

func parseMetaName(name string) (id, gs uint64, ok bool) {
	rest, found := strings.CutPrefix(name, "blk_")
	if !found {
		return 0, 0, false
	}
	rest, found = strings.CutSuffix(rest, ".meta")
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(rest, "_")
	if !found {
		return 0, 0, false
	}
	id, err1 := strconv.ParseUint(a, 10, 64)
	gs, err2 := strconv.ParseUint(b, 10, 64)
	return id, gs, err1 == nil && err2 == nil
}

func (s *store) paths(sub string, id, gs uint64) (data, meta string) {
	d := filepath.Join(s.dir, sub, fmt.Sprintf("blk_%d", id))
	return d, fmt.Sprintf("%s_%d.meta", d, gs)
}

func (s *store) loadReplica(id, gs uint64) (*replicaFile, error) {
	data, meta := s.paths("finalized", id, gs)
	st, err := os.Stat(data)
	if err != nil {
		return nil, fmt.Errorf("load replica blk_%d: %w", id, err)
	}
	f, err := os.Open(meta)
	if err != nil {
		return nil, fmt.Errorf("load replica blk_%d: %w", id, err)
	}
	defer f.Close()
	var h [metaHeaderLen]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return nil, fmt.Errorf("read %s header: %w", meta, err)
	}
	return &replicaFile{
		id: id, gs: gs, length: st.Size(),
		ctype: hadooppb.ChecksumTypeProto(h[2]), bpc: int(binary.BigEndian.Uint32(h[3:])),
		data: data, meta: meta,
	}, nil
}

// get returns the finalized replica of block id.
func (s *store) get(id uint64) (*replicaFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.finalized[id]
	if r == nil {
		return nil, fmt.Errorf("%w: blk_%d", errReplicaNotFound, id)
	}
	return r, nil
}

// list returns every finalized replica, for block reports.
func (s *store) list() []reportedReplica {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]reportedReplica, 0, len(s.finalized))
	for _, r := range s.finalized {
		out = append(out, reportedReplica{id: r.id, gs: r.gs, numBytes: r.length})
	}
	return out
}

// remove deletes the replica of block id, if any.
func (s *store) remove(id uint64) {
	s.mu.Lock()
	r := s.finalized[id]
	delete(s.finalized, id)
	s.mu.Unlock()
	if r != nil {
		os.Remove(r.data)
		os.Remove(r.meta)
	}
}

// corrupt flips the byte at off of block id's data, leaving its checksums
// as they were.
func (s *store) corrupt(id uint64, off int64) error {
	r, err := s.get(id)
	if err != nil {
		return err
	}
	if off < 0 || off >= r.length {
		return fmt.Errorf("corrupt blk_%d: offset %d outside its %d bytes", id, off, r.length)
	}
	f, err := os.OpenFile(r.data, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		return err
	}
	b[0] ^= 0xff
	_, err = f.WriteAt(b[:], off)
	return err
}

// rbwReplica is a replica being written. Chunk checksums are computed from
// the bytes as they land (the client's checksums are verified separately),
// so a partial chunk can be completed by a later packet.
type rbwReplica struct {
	s        *store
	id, gs   uint64
	ctype    hadooppb.ChecksumTypeProto
	bpc      int
	table    *crc32.Table
	data     *os.File
	meta     *os.File
	length   int64
	tailCRC  uint32 // checksum of the incomplete last chunk
	tailLen  int
	sums     []byte
	finished bool
}

func checksumTable(t hadooppb.ChecksumTypeProto) (*crc32.Table, error) {
	switch t {
	case hadooppb.ChecksumTypeProto_CHECKSUM_CRC32C:
		return castagnoli, nil
	case hadooppb.ChecksumTypeProto_CHECKSUM_CRC32:
		return crc32.IEEETable, nil
	}
	return nil, fmt.Errorf("unsupported checksum type %v", t)
}

func (s *store) createRBW(id, gs uint64, ctype hadooppb.ChecksumTypeProto, bpc int) (*rbwReplica, error) {
	table, err := checksumTable(ctype)
	if err != nil {
		return nil, err
	}
	if bpc <= 0 || bpc > 1<<20 {
		return nil, fmt.Errorf("bytes per checksum %d out of range", bpc)
	}
	s.mu.Lock()
	_, exists := s.finalized[id]
	s.mu.Unlock()
	if exists {
		return nil, fmt.Errorf("replica blk_%d already exists", id)
	}
	dataPath, metaPath := s.paths("rbw", id, gs)
	data, err := os.OpenFile(dataPath, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	meta, err := os.OpenFile(metaPath, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		data.Close()
		os.Remove(dataPath)
		return nil, err
	}
	var h [metaHeaderLen]byte
	binary.BigEndian.PutUint16(h[:], metaVersion)
	h[2] = byte(ctype)
	binary.BigEndian.PutUint32(h[3:], uint32(bpc))
	if _, err := meta.Write(h[:]); err != nil {
		data.Close()
		meta.Close()
		os.Remove(dataPath)
		os.Remove(metaPath)
		return nil, err
	}
	return &rbwReplica{s: s, id: id, gs: gs, ctype: ctype, bpc: bpc, table: table, data: data, meta: meta}, nil
}

// write appends p at offset off, which must be the replica's length.
func (r *rbwReplica) write(off int64, p []byte) error {
	if off != r.length {
		return fmt.Errorf("write blk_%d at offset %d, but the replica has %d bytes", r.id, off, r.length)
	}
	if _, err := r.data.WriteAt(p, off); err != nil {
		return err
	}
	firstChunk := r.length / int64(r.bpc)
	r.sums = r.sums[:0]
	for len(p) > 0 {
		n := r.bpc - r.tailLen
		if n > len(p) {
			n = len(p)
		}
		r.tailCRC = crc32.Update(r.tailCRC, r.table, p[:n])
		r.tailLen += n
		p = p[n:]
		r.length += int64(n)
		if r.tailLen == r.bpc {
			r.sums = binary.BigEndian.AppendUint32(r.sums, r.tailCRC)
			r.tailCRC, r.tailLen = 0, 0
		}
	}
	if r.tailLen > 0 {
		r.sums = binary.BigEndian.AppendUint32(r.sums, r.tailCRC)
	}
	_, err := r.meta.WriteAt(r.sums, metaHeaderLen+4*firstChunk)
	return err
}

// finalize closes the replica and moves it to finalized/.
func (r *rbwReplica) finalize() (*replicaFile, error) {
	r.finished = true
	err := errors.Join(r.data.Close(), r.meta.Close())
	oldData, oldMeta := r.s.paths("rbw", r.id, r.gs)
	newData, newMeta := r.s.paths("finalized", r.id, r.gs)
	if err == nil {
		err = os.Rename(oldMeta, newMeta)
	}
	if err == nil {
		err = os.Rename(oldData, newData)
	}
	if err != nil {
		os.Remove(oldData)
		os.Remove(oldMeta)
		os.Remove(newMeta)
		return nil, fmt.Errorf("finalize blk_%d: %w", r.id, err)
	}
	rf := &replicaFile{id: r.id, gs: r.gs, length: r.length, ctype: r.ctype, bpc: r.bpc, data: newData, meta: newMeta}
	r.s.mu.Lock()
	r.s.finalized[r.id] = rf
	r.s.mu.Unlock()
	return rf, nil
}

// abort discards a replica that was not finalized.
func (r *rbwReplica) abort() {
	if r.finished {
		return
	}
	r.finished = true
	r.data.Close()
	r.meta.Close()
	d, m := r.s.paths("rbw", r.id, r.gs)
	os.Remove(d)
	os.Remove(m)
}
