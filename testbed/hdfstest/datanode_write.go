package hdfstest

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"sync"
	"time"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"google.golang.org/protobuf/proto"
)

// heartbeatSeqno marks a keep-alive packet of a write pipeline.
const heartbeatSeqno = -1

// ackItem is a received packet waiting for its acknowledgement.
type ackItem struct {
	seqno  int64
	last   bool
	status hadooppb.Status
}

// opWrite serves OpWriteBlock for a new block (PIPELINE_SETUP_CREATE):
// it opens the next datanode of the pipeline, answers, then receives
// packets, verifying each chunk against the client's checksum, writing it
// and forwarding the packet downstream. A responder acknowledges each
// packet once the downstream datanodes did, so an ack means every replica
// has the bytes; the last packet's ack waits for the replica to be
// finalized and reported to the namenode.
func (d *dataNode) opWrite(conn net.Conn, br *bufio.Reader) {
	var op hadooppb.OpWriteBlockProto
	if err := readDelimited(br, &op); err != nil {
		return
	}
	d.stats.writeOps.Add(1)
	blk := op.GetHeader().GetBaseHeader().GetBlock()
	if !d.checkToken(conn, op.GetHeader().GetBaseHeader().GetToken(), blk, modeWrite) {
		return
	}
	if op.GetStage() != hadooppb.OpWriteBlockProto_PIPELINE_SETUP_CREATE {
		writeDelimited(conn, errorResponse(hadooppb.Status_ERROR_UNSUPPORTED,
			"block construction stage %v of blk_%d is not supported by this datanode (only new blocks)", op.GetStage(), blk.GetBlockId()))
		return
	}
	if blk.GetPoolId() != d.cfg.poolID {
		writeDelimited(conn, errorResponse(hadooppb.Status_ERROR, "block pool %s is not served by datanode %s", blk.GetPoolId(), d.addr()))
		return
	}
	sum := op.GetRequestedChecksum()
	ctype := sum.GetType()
	if ctype == hadooppb.ChecksumTypeProto_CHECKSUM_NULL {
		ctype = hadooppb.ChecksumTypeProto_CHECKSUM_CRC32C
	}
	bpc := int(sum.GetBytesPerChecksum())
	table, err := checksumTable(ctype)
	if err != nil {
		writeDelimited(conn, errorResponse(hadooppb.Status_ERROR_INVALID, "blk_%d: %v", blk.GetBlockId(), err))
		return
	}
	rbw, err := d.store.createRBW(blk.GetBlockId(), blk.GetGenerationStamp(), ctype, bpc)
	if err != nil {
		writeDelimited(conn, errorResponse(hadooppb.Status_ERROR, "create replica blk_%d on datanode %s: %v", blk.GetBlockId(), d.addr(), err))
		return
	}
	defer rbw.abort()

	// Connect the rest of the pipeline.
	var mirror net.Conn
	var mirrorIn *bufio.Reader
	if targets := op.GetTargets(); len(targets) > 0 {
		var addr string
		mirror, addr, err = dialDatanode(context.Background(), targets[0].GetId())
		if err == nil && d.cfg.DataTransferProtection != "" {
			mirror, err = secureMirror(mirror, op.GetHeader().GetBaseHeader().GetToken(), d.cfg.dataTransfer())
		}
		if err == nil && !d.track(mirror) {
			mirror.Close()
			err = errStopped
		}
		if err == nil {
			defer d.untrack(mirror)
			mirrorIn = bufio.NewReader(mirror)
			down := proto.Clone(&op).(*hadooppb.OpWriteBlockProto)
			down.Targets = targets[1:]
			err = writeOp(mirror, opWriteBlock, down)
			var resp hadooppb.BlockOpResponseProto
			if err == nil {
				err = readDelimited(mirrorIn, &resp)
			}
			if err == nil && resp.GetStatus() != hadooppb.Status_SUCCESS {
				if resp.GetFirstBadLink() != "" {
					addr = resp.GetFirstBadLink()
				}
				err = fmt.Errorf("%v: %s", resp.GetStatus(), resp.GetMessage())
			}
		}
		if err != nil {
			writeDelimited(conn, &hadooppb.BlockOpResponseProto{
				Status:       hadooppb.Status_ERROR.Enum(),
				FirstBadLink: proto.String(addr),
				Message:      proto.String(fmt.Sprintf("connect pipeline to %s: %v", addr, err)),
			})
			return
		}
	}
	if err := writeDelimited(conn, &hadooppb.BlockOpResponseProto{
		Status:       hadooppb.Status_SUCCESS.Enum(),
		FirstBadLink: proto.String(""),
	}); err != nil {
		return
	}

	acks := make(chan ackItem, 64)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.respond(conn, mirrorIn, acks, rbw)
	}()
	complete := d.receive(br, mirror, rbw, bpc, table, acks)
	close(acks)
	if !complete && mirror != nil {
		// Nothing more is coming: cut the rest of the pipeline loose so the
		// responder stops waiting for its acks.
		mirror.Close()
	}
	wg.Wait()
}

// receive reads packets until the last one or a failure, queueing acks. It
// reports whether the last packet arrived intact.
func (d *dataNode) receive(br *bufio.Reader, mirror net.Conn, rbw *rbwReplica, bpc int, table *crc32.Table, acks chan<- ackItem) bool {
	var buf []byte
	for {
		p, nb, err := readPacket(br, buf)
		buf = nb
		if err != nil {
			return false
		}
		d.stats.packetsReceived.Add(1)
		if mirror != nil {
			if _, err := mirror.Write(p.raw); err != nil {
				// The responder sees the broken mirror when reading its ack.
				mirror = nil
			}
		}
		h := &p.header
		if h.GetSeqno() == heartbeatSeqno {
			acks <- ackItem{seqno: heartbeatSeqno, status: hadooppb.Status_SUCCESS}
			continue
		}
		if off, ok := verifyChunks(p.data, p.sums, bpc, table); !ok {
			d.stats.checksumErrors.Add(1)
			d.log.Warn("checksum error in received packet", "block", rbw.id, "offset", h.GetOffsetInBlock()+int64(off))
			acks <- ackItem{seqno: h.GetSeqno(), status: hadooppb.Status_ERROR_CHECKSUM}
			return false
		}
		st := hadooppb.Status_SUCCESS
		if len(p.data) > 0 {
			if err := rbw.write(h.GetOffsetInBlock(), p.data); err != nil {
				d.log.Warn("write replica", "block", rbw.id, "err", err)
				st = hadooppb.Status_ERROR
			}
			d.stats.bytesReceived.Add(int64(len(p.data)))
		}
		acks <- ackItem{seqno: h.GetSeqno(), last: h.GetLastPacketInBlock(), status: st}
		if st != hadooppb.Status_SUCCESS {
			return false
		}
		if h.GetLastPacketInBlock() {
			return true
		}
	}
}

// respond acknowledges packets upstream, merging the downstream replies.
func (d *dataNode) respond(up net.Conn, down *bufio.Reader, acks <-chan ackItem, rbw *rbwReplica) {
	failed := false
	for it := range acks {
		if failed {
			continue // drain so the receiver never blocks
		}
		reply := []hadooppb.Status{it.status}
		if down != nil {
			var ack hadooppb.PipelineAckProto
			err := readDelimited(down, &ack)
			switch {
			case err != nil:
				reply = append(reply, hadooppb.Status_ERROR)
			case ack.GetSeqno() != it.seqno:
				reply = append(reply, hadooppb.Status_ERROR)
				d.log.Warn("pipeline ack out of order", "block", rbw.id, "want", it.seqno, "got", ack.GetSeqno())
			default:
				reply = append(reply, ack.GetReply()...)
			}
		}
		ok := true
		for _, s := range reply {
			ok = ok && s == hadooppb.Status_SUCCESS
		}
		if ok && it.last {
			if err := d.finalize(rbw); err != nil {
				d.log.Warn("finalize replica", "block", rbw.id, "err", err)
				reply[0], ok = hadooppb.Status_ERROR, false
			}
		}
		if err := writeDelimited(up, &hadooppb.PipelineAckProto{Seqno: proto.Int64(it.seqno), Reply: reply}); err != nil || !ok {
			failed = true
		}
	}
}

// finalize publishes a fully received replica and reports it.
func (d *dataNode) finalize(rbw *rbwReplica) error {
	rf, err := rbw.finalize()
	if err != nil {
		return err
	}
	if !d.nn.blockReceived(d.index, reportedReplica{id: rf.id, gs: rf.gs, numBytes: rf.length}) {
		d.store.remove(rf.id)
		return errors.New("the namenode no longer knows the block")
	}
	return nil
}

// writeOp sends an op header and message.
// secureMirror runs the data-transfer handshake on a connection to the
// next datanode of a pipeline with the client's block token, as a
// datanode's own SASL client does, and closes it on failure.
func secureMirror(c net.Conn, tok *hadooppb.TokenProto, cfg hadooprpc.DataTransferConfig) (net.Conn, error) {
	c.SetDeadline(time.Now().Add(30 * time.Second))
	sc, err := hadooprpc.DataTransferHandshake(c, hadooprpc.TokenFromProto(tok), cfg)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("data-transfer handshake: %w", err)
	}
	c.SetDeadline(time.Time{})
	return sc, nil
}

func writeOp(c net.Conn, op byte, msg proto.Message) error {
	b, err := proto.Marshal(msg)
	if err != nil {
		return err
	}
	out := append([]byte{0, dataTransferVersion, op}, binary.AppendUvarint(nil, uint64(len(b)))...)
	_, err = c.Write(append(out, b...))
	return err
}
