package hdfstest

import (
	"bufio"
	"context"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"google.golang.org/protobuf/proto"
)

// The data-transfer protocol: a connection carries operations, each a
// big-endian uint16 version (28), an op code and a varint-delimited op
// message, answered by a varint-delimited BlockOpResponseProto and, for
// reads and writes, a stream of packets.
const (
	dataTransferVersion = 28
	opWriteBlock        = 0x50
	opReadBlock         = 0x51
	opBlockChecksum     = 0x55

	maxPacketSize = 16 << 20 // what HDFS's PacketReceiver accepts
)

// namenodeLink is what a datanode tells its namenode.
type namenodeLink interface {
	blockReceived(dn int, r reportedReplica) bool
	reportCorrupt(dn int, id uint64)
}

// dataNode serves the data-transfer protocol over one store.
type dataNode struct {
	index    int
	uuid     string
	hostname string
	ip       string
	store    *store
	nn       namenodeLink
	cfg      Config
	stats    *counters
	hold     *readHold
	log      *slog.Logger
	keys     *blockKeys // the namenode's block keys; nil: no block tokens

	mu    sync.Mutex
	ln    net.Listener
	port  int
	conns map[net.Conn]struct{}
	alive bool
	wg    sync.WaitGroup
}

// listen binds the transfer port (the previous one when restarting) and
// serves it until stop.
func (d *dataNode) listen() error {
	addr := net.JoinHostPort(d.ip, strconv.Itoa(d.port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("datanode %d: listen on %s: %w", d.index, addr, err)
	}
	d.mu.Lock()
	d.ln = ln
	d.port = ln.Addr().(*net.TCPAddr).Port
	d.conns = map[net.Conn]struct{}{}
	d.alive = true
	d.mu.Unlock()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.acceptLoop(ln)
	}()
	return nil
}

func (d *dataNode) addr() string { return net.JoinHostPort(d.ip, strconv.Itoa(d.port)) }

func (d *dataNode) idProto() *hadooppb.DatanodeIDProto {
	return &hadooppb.DatanodeIDProto{
		IpAddr:       proto.String(d.ip),
		HostName:     proto.String(d.hostname),
		DatanodeUuid: proto.String(d.uuid),
		XferPort:     proto.Uint32(uint32(d.port)),
		InfoPort:     proto.Uint32(0),
		IpcPort:      proto.Uint32(0),
	}
}

// stop closes the listener and drops every connection, as a crash would,
// and waits for the connection goroutines.
func (d *dataNode) stop() {
	d.mu.Lock()
	d.alive = false
	if d.ln != nil {
		d.ln.Close()
	}
	for c := range d.conns {
		c.Close()
	}
	d.mu.Unlock()
	d.wg.Wait()
}

// track registers a connection to drop when the datanode stops; it
// reports false when the datanode is already stopped.
func (d *dataNode) track(c net.Conn) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.alive {
		return false
	}
	d.conns[c] = struct{}{}
	return true
}

func (d *dataNode) untrack(c net.Conn) {
	d.mu.Lock()
	delete(d.conns, c)
	d.mu.Unlock()
	c.Close()
}

func (d *dataNode) acceptLoop(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		if !d.track(conn) {
			conn.Close()
			return
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			defer d.untrack(conn)
			d.serveConn(conn)
		}()
	}
}

// serveConn runs operations until the client hangs up. After a read the
// Java client may send a ClientReadStatusProto; it is read and ignored.
// With dfs.data.transfer.protection the connection must open with the SASL
// handshake.
func (d *dataNode) serveConn(conn net.Conn) {
	br := bufio.NewReaderSize(conn, 64<<10)
	if d.cfg.DataTransferProtection != "" {
		var ok bool
		if conn, br, ok = d.handshake(conn, br); !ok {
			return
		}
	}
	for first := true; ; first = false {
		if !first {
			b, err := br.Peek(1)
			if err != nil {
				return
			}
			if b[0] != 0 { // not a version's high byte: a read status
				var st hadooppb.ClientReadStatusProto
				if err := readDelimited(br, &st); err != nil {
					return
				}
				continue
			}
		}
		var h [3]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return
		}
		if v := binary.BigEndian.Uint16(h[:2]); v != dataTransferVersion {
			d.log.Warn("data transfer version mismatch", "remote", conn.RemoteAddr(), "version", v)
			return
		}
		var keep bool
		switch h[2] {
		case opReadBlock:
			keep = d.opRead(conn, br)
		case opWriteBlock:
			d.opWrite(conn, br)
		case opBlockChecksum:
			keep = d.opChecksum(conn, br)
		default:
			writeDelimited(conn, &hadooppb.BlockOpResponseProto{
				Status:  hadooppb.Status_ERROR_UNSUPPORTED.Enum(),
				Message: proto.String(fmt.Sprintf("unsupported data transfer op 0x%02x", h[2])),
			})
		}
		if !keep {
			return
		}
	}
}

// handshake runs the data-transfer SASL handshake on a new connection and
// returns the connection to serve operations on.
func (d *dataNode) handshake(conn net.Conn, br *bufio.Reader) (net.Conn, *bufio.Reader, bool) {
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	magic, err := br.Peek(4)
	if err != nil {
		return nil, nil, false
	}
	if binary.BigEndian.Uint32(magic) != hadooprpc.DataTransferMagic {
		// As a Hadoop datanode: no answer a client could read, just a log.
		d.stats.handshakesRefused.Add(1)
		d.log.Warn("a connection without the data-transfer handshake that dfs.data.transfer.protection requires", "remote", conn.RemoteAddr(), "protection", d.cfg.DataTransferProtection)
		return nil, nil, false
	}
	br.Discard(4)
	srv := hadooprpc.DataTransferServer{DataTransferConfig: d.cfg.dataTransfer(), Lookup: d.keys.lookup}
	sc, user, err := srv.Accept(conn, br)
	if err != nil {
		d.stats.handshakesRefused.Add(1)
		d.log.Warn("data-transfer handshake refused", "remote", conn.RemoteAddr(), "err", err)
		return nil, nil, false
	}
	conn.SetDeadline(time.Time{})
	d.stats.handshakes.Add(1)
	d.log.Debug("data-transfer handshake", "remote", conn.RemoteAddr(), "user", user)
	return sc, bufio.NewReaderSize(sc, 64<<10), true
}

// checkToken verifies the block token of an operation on blk when block
// tokens are on, and answers the client when it does not grant mode.
func (d *dataNode) checkToken(conn net.Conn, tok *hadooppb.TokenProto, blk *hadooppb.ExtendedBlockProto, mode string) bool {
	if d.keys == nil {
		return true
	}
	if err := d.keys.check(tok, blk.GetPoolId(), blk.GetBlockId(), mode); err != nil {
		writeDelimited(conn, errorResponse(hadooppb.Status_ERROR_ACCESS_TOKEN, "Got access token error, status message %v, for OP_%s_BLOCK, block %s:blk_%d: %v",
			hadooppb.Status_ERROR_ACCESS_TOKEN, mode, blk.GetPoolId(), blk.GetBlockId(), err))
		return false
	}
	return true
}

func errorResponse(st hadooppb.Status, format string, args ...any) *hadooppb.BlockOpResponseProto {
	return &hadooppb.BlockOpResponseProto{Status: st.Enum(), Message: proto.String(fmt.Sprintf(format, args...))}
}

// openReplica finds the replica an op names, checking pool and genstamp.
func (d *dataNode) openReplica(b *hadooppb.ExtendedBlockProto, pool string) (*replicaFile, *hadooppb.BlockOpResponseProto) {
	if b.GetPoolId() != pool {
		return nil, errorResponse(hadooppb.Status_ERROR, "block pool %s is not served by datanode %s", b.GetPoolId(), d.addr())
	}
	r, err := d.store.get(b.GetBlockId())
	if err != nil {
		return nil, errorResponse(hadooppb.Status_ERROR, "Replica not found for %s:blk_%d_%d on datanode %s", pool, b.GetBlockId(), b.GetGenerationStamp(), d.addr())
	}
	if r.gs < b.GetGenerationStamp() {
		return nil, errorResponse(hadooppb.Status_ERROR, "Replica blk_%d has generation stamp %d, older than the requested %d", r.id, r.gs, b.GetGenerationStamp())
	}
	return r, nil
}

// opRead serves OpReadBlock: the chunk-aligned range covering the request,
// in packets of chunks with their stored checksums, then an empty last
// packet. The datanode verifies every chunk before sending it: a replica
// that fails verification is reported to the namenode and the client is
// cut off (before the first packet, with ERROR_CHECKSUM; later, with a
// connection reset), so the client fails over to another replica instead
// of receiving bad bytes.
func (d *dataNode) opRead(conn net.Conn, br *bufio.Reader) bool {
	var op hadooppb.OpReadBlockProto
	if err := readDelimited(br, &op); err != nil {
		return false
	}
	d.stats.readOps.Add(1)
	d.hold.wait()
	blk := op.GetHeader().GetBaseHeader().GetBlock()
	if !d.checkToken(conn, op.GetHeader().GetBaseHeader().GetToken(), blk, modeRead) {
		return false
	}
	r, bad := d.openReplica(blk, d.cfg.poolID)
	if bad != nil {
		writeDelimited(conn, bad)
		return false
	}
	off, length := int64(op.GetOffset()), int64(op.GetLen())
	if off < 0 || length < 0 || off > r.length || off+length > r.length {
		writeDelimited(conn, errorResponse(hadooppb.Status_ERROR_INVALID,
			"Offset %d and length %d don't match blk_%d of %d bytes", off, length, r.id, r.length))
		return false
	}
	s, err := newBlockSender(r, off, off+length, d.cfg.ReadPacketSize, op.GetSendChecksums(), d.cfg.verifyOnRead)
	if err != nil {
		writeDelimited(conn, errorResponse(hadooppb.Status_ERROR, "open blk_%d on datanode %s: %v", r.id, d.addr(), err))
		return false
	}
	defer s.close()

	// Read and check the first packet before answering, so a corrupt
	// replica is refused cleanly.
	pkt, err := s.next()
	if err != nil {
		d.readFailed(r, err)
		st := hadooppb.Status_ERROR
		if errors.Is(err, errChecksum) {
			st = hadooppb.Status_ERROR_CHECKSUM
		}
		writeDelimited(conn, errorResponse(st, "read blk_%d on datanode %s: %v", r.id, d.addr(), err))
		return false
	}
	resp := &hadooppb.BlockOpResponseProto{
		Status: hadooppb.Status_SUCCESS.Enum(),
		ReadOpChecksumInfo: &hadooppb.ReadOpChecksumInfoProto{
			Checksum:    &hadooppb.ChecksumProto{Type: s.ctype.Enum(), BytesPerChecksum: proto.Uint32(uint32(r.bpc))},
			ChunkOffset: proto.Uint64(uint64(s.start)),
		},
	}
	if err := writeDelimited(conn, resp); err != nil {
		return false
	}
	for pkt != nil {
		n, err := pkt.WriteTo(conn)
		d.stats.bytesSent.Add(n)
		d.stats.packetsSent.Add(1)
		if err != nil {
			return false
		}
		if pkt, err = s.next(); err != nil {
			d.readFailed(r, err)
			abort(conn)
			return false
		}
	}
	return true
}

func (d *dataNode) readFailed(r *replicaFile, err error) {
	if errors.Is(err, errChecksum) {
		d.stats.checksumErrors.Add(1)
		d.log.Warn("corrupt replica", "block", r.id, "err", err)
		d.nn.reportCorrupt(d.index, r.id)
	}
}

// abort resets a connection rather than closing it cleanly, so the peer
// sees an error and not the end of a stream.
func abort(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// opChecksum serves OpBlockChecksum: the MD5 of the block's chunk CRCs.
func (d *dataNode) opChecksum(conn net.Conn, br *bufio.Reader) bool {
	var op hadooppb.OpBlockChecksumProto
	if err := readDelimited(br, &op); err != nil {
		return false
	}
	if !d.checkToken(conn, op.GetHeader().GetToken(), op.GetHeader().GetBlock(), modeRead) {
		return false
	}
	r, bad := d.openReplica(op.GetHeader().GetBlock(), d.cfg.poolID)
	if bad != nil {
		writeDelimited(conn, bad)
		return false
	}
	sums, err := os.ReadFile(r.meta)
	if err != nil || len(sums) < metaHeaderLen {
		writeDelimited(conn, errorResponse(hadooppb.Status_ERROR, "read checksums of blk_%d: %v", r.id, err))
		return false
	}
	sums = sums[metaHeaderLen:]
	digest := md5.Sum(sums)
	resp := &hadooppb.BlockOpResponseProto{
		Status: hadooppb.Status_SUCCESS.Enum(),
		ChecksumResponse: &hadooppb.OpBlockChecksumResponseProto{
			BytesPerCrc:   proto.Uint32(uint32(r.bpc)),
			CrcPerBlock:   proto.Uint64(uint64(len(sums) / 4)),
			BlockChecksum: digest[:],
			CrcType:       r.ctype.Enum(),
		},
	}
	return writeDelimited(conn, resp) == nil
}

// readDelimited reads one varint-delimited message.
func readDelimited(br *bufio.Reader, msg proto.Message) error {
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return err
	}
	if n > maxPacketSize {
		return fmt.Errorf("message of %d bytes is too large", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(br, buf); err != nil {
		return err
	}
	return proto.Unmarshal(buf, msg)
}

// writeDelimited writes one varint-delimited message.
func writeDelimited(w io.Writer, msg proto.Message) error {
	b, err := proto.Marshal(msg)
	if err != nil {
		return err
	}
	out := binary.AppendUvarint(make([]byte, 0, len(b)+binary.MaxVarintLen32), uint64(len(b)))
	_, err = w.Write(append(out, b...))
	return err
}

// dialDatanode connects to a downstream datanode of a write pipeline.
func dialDatanode(ctx context.Context, id *hadooppb.DatanodeIDProto) (net.Conn, string, error) {
	addr := net.JoinHostPort(id.GetIpAddr(), strconv.Itoa(int(id.GetXferPort())))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	return c, addr, err
}
