package ps

import (
	"encoding/binary"
	"fmt"
)

// The data link: when a job's data link is UCX, workers send pulls and
// pushes as UCX requests (rdma/ucx) instead of gRPC calls. A request's
// head is a DataHead; its body is the keys and, for a push, the
// gradients, both little-endian arrays as on gRPC. A reply's head is a
// DataStatus; a pull's payload is the rows.

// Data link operations.
const (
	OpPull = 1
	OpPush = 2
)

// DataHead is the head of a pull or push over the data link: the fields
// of pspb.PullRequest and pspb.PushRequest but the arrays.
type DataHead struct {
	Op          uint32
	Worker      int32
	RingVersion uint64
	// Clock is a pull's worker clock; Seq a push's sequence number.
	Clock int64
	Seq   uint64
	// Origin is the server a push first went to.
	Origin int32
	// Keys is the number of keys in the body.
	Keys  uint32
	Table string
}

// dataHeadBytes is a head's size before the table name.
const dataHeadBytes = 40

// AppendDataHead appends h's encoding to b.
func AppendDataHead(b []byte, h DataHead) []byte {
	b = binary.LittleEndian.AppendUint32(b, h.Op)
	b = binary.LittleEndian.AppendUint32(b, uint32(h.Worker))
	b = binary.LittleEndian.AppendUint64(b, h.RingVersion)
	b = binary.LittleEndian.AppendUint64(b, uint64(h.Clock))
	b = binary.LittleEndian.AppendUint64(b, h.Seq)
	b = binary.LittleEndian.AppendUint32(b, uint32(h.Origin))
	b = binary.LittleEndian.AppendUint32(b, h.Keys)
	return append(b, h.Table...)
}

// DecodeDataHead reads a head; its table name is left in name, for the
// caller to turn into a string as it likes (without allocating).
func DecodeDataHead(b []byte) (h DataHead, name []byte, err error) {
	if len(b) < dataHeadBytes {
		return DataHead{}, nil, fmt.Errorf("data link head of %d bytes: want at least %d", len(b), dataHeadBytes)
	}
	h = DataHead{
		Op:          binary.LittleEndian.Uint32(b),
		Worker:      int32(binary.LittleEndian.Uint32(b[4:])),
		RingVersion: binary.LittleEndian.Uint64(b[8:]),
		Clock:       int64(binary.LittleEndian.Uint64(b[16:])),
		Seq:         binary.LittleEndian.Uint64(b[24:]),
		Origin:      int32(binary.LittleEndian.Uint32(b[32:])),
		Keys:        binary.LittleEndian.Uint32(b[36:]),
	}
	return h, b[dataHeadBytes:], nil
}

// DataStatus is a reply's head: a gRPC status code (0 for OK) and its
// message, and for a push whether the server had applied it already.
type DataStatus struct {
	Code      uint32
	Duplicate bool
	Message   string
}

// AppendDataStatus appends s's encoding to b.
func AppendDataStatus(b []byte, s DataStatus) []byte {
	b = binary.LittleEndian.AppendUint32(b, s.Code)
	flags := uint32(0)
	if s.Duplicate {
		flags = 1
	}
	b = binary.LittleEndian.AppendUint32(b, flags)
	return append(b, s.Message...)
}

// DecodeDataStatus reads a reply's head.
func DecodeDataStatus(b []byte) (DataStatus, error) {
	if len(b) < 8 {
		return DataStatus{}, fmt.Errorf("data link reply head of %d bytes: want at least 8", len(b))
	}
	return DataStatus{Code: binary.LittleEndian.Uint32(b), Duplicate: binary.LittleEndian.Uint32(b[4:])&1 != 0,
		Message: string(b[8:])}, nil
}
