package hdfstest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"google.golang.org/protobuf/proto"
)

// A packet on the wire: a big-endian uint32 payload length (4 + checksums
// + data), a big-endian uint16 header length, the PacketHeaderProto, the
// chunk checksums (4 bytes each), then the chunks.

// errChecksum reports data that does not match its checksum.
var errChecksum = errors.New("checksum mismatch")

// blockSender produces the packets of one block read.
type blockSender struct {
	r          *replicaFile
	data, meta *os.File
	start, end int64 // chunk-aligned range being sent
	pos        int64
	ctype      hadooppb.ChecksumTypeProto
	table      *crc32.Table
	sendSums   bool
	verify     bool
	packetSize int
	seqno      int64
	done       bool
	buf, sums  []byte
	hdr        []byte
}

func newBlockSender(r *replicaFile, off, end int64, packetSize int, sendSums, verify bool) (*blockSender, error) {
	bpc := int64(r.bpc)
	s := &blockSender{r: r, start: off - off%bpc, ctype: r.ctype, sendSums: sendSums, verify: verify}
	// The end rounds up to a chunk boundary (or the replica's end), since
	// checksums cover whole chunks.
	s.end = (end + bpc - 1) / bpc * bpc
	if s.end > r.length {
		s.end = r.length
	}
	s.pos = s.start
	s.packetSize = packetSize / r.bpc * r.bpc
	if s.packetSize < r.bpc {
		s.packetSize = r.bpc
	}
	if !sendSums {
		s.ctype = hadooppb.ChecksumTypeProto_CHECKSUM_NULL
	}
	table, err := checksumTable(r.ctype)
	if err != nil {
		return nil, err
	}
	s.table = table
	if s.data, err = os.Open(r.data); err != nil {
		return nil, err
	}
	if s.meta, err = os.Open(r.meta); err != nil {
		s.data.Close()
		return nil, err
	}
	n := s.packetSize
	if span := int(s.end - s.start); span < n {
		n = span
	}
	s.buf = make([]byte, n)
	s.sums = make([]byte, (n+r.bpc-1)/r.bpc*4)
	return s, nil
}

func (s *blockSender) close() {
	s.data.Close()
	s.meta.Close()
}

// next returns the next packet, nil after the last one.
func (s *blockSender) next() (*net.Buffers, error) {
	if s.done {
		return nil, nil
	}
	if s.pos >= s.end {
		s.done = true
		s.header(0, true)
		return &net.Buffers{s.hdr}, nil
	}
	n := int64(s.packetSize)
	if rem := s.end - s.pos; rem < n {
		n = rem
	}
	data := s.buf[:n]
	if _, err := s.data.ReadAt(data, s.pos); err != nil {
		return nil, fmt.Errorf("read blk_%d at offset %d: %w", s.r.id, s.pos, err)
	}
	bpc := int64(s.r.bpc)
	chunks := (n + bpc - 1) / bpc
	sums := s.sums[:chunks*4]
	if _, err := s.meta.ReadAt(sums, metaHeaderLen+s.pos/bpc*4); err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: checksums end before the data", errChecksum)
		}
		return nil, fmt.Errorf("read checksums of blk_%d at offset %d: %w", s.r.id, s.pos, err)
	}
	if s.verify {
		for i := int64(0); i < chunks; i++ {
			c := data[i*bpc : min((i+1)*bpc, n)]
			if crc32.Checksum(c, s.table) != binary.BigEndian.Uint32(sums[i*4:]) {
				return nil, fmt.Errorf("%w in blk_%d at block offset %d", errChecksum, s.r.id, s.pos+i*bpc)
			}
		}
	}
	if !s.sendSums {
		sums = nil
	}
	s.header(int(n), false)
	pkt := &net.Buffers{s.hdr, sums, data}
	s.pos += n
	return pkt, nil
}

func (s *blockSender) header(dataLen int, last bool) {
	s.hdr = appendPacketHeader(s.hdr[:0], &hadooppb.PacketHeaderProto{
		OffsetInBlock:     proto.Int64(s.pos),
		Seqno:             proto.Int64(s.seqno),
		LastPacketInBlock: proto.Bool(last),
		DataLen:           proto.Int32(int32(dataLen)),
	}, dataLen, s.sendSums, s.r.bpc)
	s.seqno++
}

// appendPacketHeader appends the length prefix and header of a packet with
// dataLen bytes of data and, when sums is set, its chunk checksums.
func appendPacketHeader(buf []byte, h *hadooppb.PacketHeaderProto, dataLen int, sums bool, bpc int) []byte {
	hb, _ := proto.Marshal(h)
	sumLen := 0
	if sums {
		sumLen = (dataLen + bpc - 1) / bpc * 4
	}
	buf = binary.BigEndian.AppendUint32(buf, uint32(4+sumLen+dataLen))
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(hb)))
	return append(buf, hb...)
}

// packet is one received packet.
type packet struct {
	raw    []byte // the whole frame, for mirroring
	header hadooppb.PacketHeaderProto
	sums   []byte
	data   []byte
}

// readPacket reads one packet into buf (grown as needed).
func readPacket(r io.Reader, buf []byte) (*packet, []byte, error) {
	var pre [6]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return nil, buf, err
	}
	payload := int(binary.BigEndian.Uint32(pre[:4]))
	hlen := int(binary.BigEndian.Uint16(pre[4:]))
	if payload < 4 || payload > maxPacketSize {
		return nil, buf, fmt.Errorf("packet payload of %d bytes is out of range", payload)
	}
	total := 6 + hlen + payload - 4
	if cap(buf) < total {
		buf = make([]byte, total)
	}
	raw := buf[:total]
	copy(raw, pre[:])
	if _, err := io.ReadFull(r, raw[6:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, buf, err
	}
	p := &packet{raw: raw}
	if err := proto.Unmarshal(raw[6:6+hlen], &p.header); err != nil {
		return nil, buf, fmt.Errorf("packet header: %w", err)
	}
	body := raw[6+hlen:]
	dataLen := int(p.header.GetDataLen())
	if dataLen < 0 || dataLen > len(body) {
		return nil, buf, fmt.Errorf("packet data length %d exceeds its %d-byte body", dataLen, len(body))
	}
	p.sums, p.data = body[:len(body)-dataLen], body[len(body)-dataLen:]
	return p, buf, nil
}

// verifyChunks checks data against sums, chunk by chunk from the packet's
// start.
func verifyChunks(data, sums []byte, bpc int, table *crc32.Table) (bad int, ok bool) {
	chunks := (len(data) + bpc - 1) / bpc
	if len(sums) != chunks*4 {
		return 0, false
	}
	for i := 0; i < chunks; i++ {
		c := data[i*bpc : min((i+1)*bpc, len(data))]
		if crc32.Checksum(c, table) != binary.BigEndian.Uint32(sums[i*4:]) {
			return i * bpc, false
		}
	}
	return 0, true
}
