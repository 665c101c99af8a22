package hadooprpc

import (
	"bufio"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
)

// DataTransferMagic opens a data-transfer connection that starts with a
// SASL handshake (dfs.data.transfer.protection), where a plain one starts
// with the protocol version.
const DataTransferMagic = 0xDEADBEEF

// The DIGEST-MD5 names of a datanode: protocol "hdfs", server "0", which
// is also its realm.
const (
	dataTransferProtocol = "hdfs"
	dataTransferServerID = "0"
	dataTransferURI      = dataTransferProtocol + "/" + dataTransferServerID
)

// ErrDataTransferRefused reports a datanode that refused a data-transfer
// handshake (an unknown or expired block token, for one).
var ErrDataTransferRefused = errors.New("hadooprpc: data-transfer handshake refused")

// maxHandshakeMessage bounds one handshake message.
const maxHandshakeMessage = 64 << 10

// CipherSuiteAESCTR is the cipher suite of
// dfs.encrypt.data.transfer.cipher.suites that Hadoop speaks: AES in
// counter mode, which replaces the DIGEST-MD5 cipher after a handshake at
// privacy when both ends name it.
const CipherSuiteAESCTR = "AES/CTR/NoPadding"

// aesKeySize is the AES key length Hadoop's datanodes use by default
// (dfs.encrypt.data.transfer.cipher.key.bitlength 128).
const aesKeySize = 16

// DataTransferConfig is what either end of a data-transfer connection takes
// from hdfs-site.xml.
type DataTransferConfig struct {
	// Protection is dfs.data.transfer.protection: the levels accepted, in
	// order of preference; empty means authentication.
	Protection string
	// CipherSuites is dfs.encrypt.data.transfer.cipher.suites: with
	// AES/CTR/NoPadding on both ends, a connection at privacy switches to
	// AES-CTR under fresh keys the datanode sends inside the security
	// layer, far faster than triple DES (and without its integrity check,
	// as in Hadoop).
	CipherSuites string
}

func (c DataTransferConfig) aes() bool {
	for _, s := range strings.Split(c.CipherSuites, ",") {
		if strings.TrimSpace(s) == CipherSuiteAESCTR {
			return true
		}
	}
	return false
}

// DataTransferServer is the datanode side of the SASL handshake that opens
// data-transfer connections when dfs.data.transfer.protection is set:
// DIGEST-MD5 with the client's block token, then, at integrity or privacy,
// every message in RFC 2831 wrapping behind a 4-byte length, or AES-CTR
// when both ends name it in their cipher suites, as Hadoop's
// SaslDataTransferServer does. Only block tokens are taken, not the keys of
// dfs.encrypt.data.transfer.
type DataTransferServer struct {
	DataTransferConfig
	// Lookup checks block token identifiers and returns their password
	// and the user they were issued to.
	Lookup TokenLookup
}

// Accept runs the handshake on conn after the magic number has been read
// from r (conn's reader, perhaps buffered), and returns the connection to
// serve operations on and the token's user. A handshake refused is
// answered with an error message before the error is returned.
func (s DataTransferServer) Accept(conn net.Conn, r io.Reader) (net.Conn, string, error) {
	levels, err := ParseProtection(s.Protection)
	if err != nil {
		return nil, "", err
	}
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReader(r)
	}
	var first hadooppb.DataTransferEncryptorMessageProto
	if err := readHandshake(br, &first); err != nil {
		return nil, "", fmt.Errorf("read the client's first handshake message: %w", err)
	}
	challenge, nonce := digestChallenge(levels, 0)
	// A datanode's realm is its server name.
	challenge = strings.Replace(challenge, `realm="`+digestRealm+`"`, `realm="`+dataTransferServerID+`"`, 1)
	if err := writeHandshake(conn, &hadooppb.DataTransferEncryptorMessageProto{
		Status: hadooppb.DataTransferEncryptorMessageProto_SUCCESS.Enum(), Payload: []byte(challenge),
	}); err != nil {
		return nil, "", err
	}
	var resp hadooppb.DataTransferEncryptorMessageProto
	if err := readHandshake(br, &resp); err != nil {
		return nil, "", fmt.Errorf("read the client's digest response: %w", err)
	}
	v, err := verifyDigest(resp.GetPayload(), nonce, dataTransferURI, maskOf(levels), s.Lookup)
	if err != nil {
		writeHandshake(conn, &hadooppb.DataTransferEncryptorMessageProto{
			Status: hadooppb.DataTransferEncryptorMessageProto_ERROR.Enum(), Message: proto.String(err.Error()),
			AccessTokenError: proto.Bool(errors.Is(err, ErrTokenRejected)),
		})
		return nil, "", err
	}
	done := &hadooppb.DataTransferEncryptorMessageProto{
		Status: hadooppb.DataTransferEncryptorMessageProto_SUCCESS.Enum(), Payload: []byte("rspauth=" + v.rspauth),
	}
	var keys *hadooppb.CipherOptionProto
	if v.layer != nil && v.layer.level() == qopPrivacy && s.aes() && offersAES(resp.GetCipherOption()) {
		// Fresh keys and IVs, the keys wrapped by the security layer (the
		// IVs travel as they are), as Hadoop's datanode sends them.
		keys = &hadooppb.CipherOptionProto{Suite: hadooppb.CipherSuiteProto_AES_CTR_NOPADDING.Enum(),
			InKey: randomBytes(aesKeySize), InIv: randomBytes(aes.BlockSize), OutKey: randomBytes(aesKeySize), OutIv: randomBytes(aes.BlockSize)}
		sent := proto.Clone(keys).(*hadooppb.CipherOptionProto)
		if sent.InKey, err = v.layer.wrap(keys.InKey); err == nil {
			sent.OutKey, err = v.layer.wrap(keys.OutKey)
		}
		if err != nil {
			return nil, "", err
		}
		done.CipherOption = []*hadooppb.CipherOptionProto{sent}
	}
	if err := writeHandshake(conn, done); err != nil {
		return nil, "", err
	}
	switch {
	case keys != nil:
		c, err := newAESConn(conn, br, keys.GetOutKey(), keys.GetOutIv(), keys.GetInKey(), keys.GetInIv())
		return c, v.user, err
	case v.layer == nil:
		return &readerConn{Conn: conn, r: br}, v.user, nil
	}
	return newSASLStream(conn, br, v.layer, v.clientMaxBuf), v.user, nil
}

func offersAES(opts []*hadooppb.CipherOptionProto) bool {
	for _, o := range opts {
		if o.GetSuite() == hadooppb.CipherSuiteProto_AES_CTR_NOPADDING {
			return true
		}
	}
	return false
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// DataTransferHandshake runs the client side of the handshake on conn with
// tok, a block token, at the first level of protection (dfs.data.transfer.
// protection) the datanode offers too, offering AES-CTR at privacy when the
// cipher suites name it, and returns the connection to send operations on.
func DataTransferHandshake(conn net.Conn, tok Token, cfg DataTransferConfig) (net.Conn, error) {
	var magic [4]byte
	binary.BigEndian.PutUint32(magic[:], DataTransferMagic)
	first, err := delimited(&hadooppb.DataTransferEncryptorMessageProto{Status: hadooppb.DataTransferEncryptorMessageProto_SUCCESS.Enum()})
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write(append(magic[:], first...)); err != nil {
		return nil, err
	}
	br := bufio.NewReader(conn)
	var ch hadooppb.DataTransferEncryptorMessageProto
	if err := readHandshakeOK(br, &ch); err != nil {
		return nil, err
	}
	dc, err := newDigestClient(ch.GetPayload(), tok, dataTransferURI, cfg.Protection, "the datanode at "+conn.RemoteAddr().String(), settingDataTransfer)
	if err != nil {
		return nil, err
	}
	resp := &hadooppb.DataTransferEncryptorMessageProto{Status: hadooppb.DataTransferEncryptorMessageProto_SUCCESS.Enum(), Payload: dc.response}
	if dc.level == qopPrivacy && cfg.aes() {
		resp.CipherOption = []*hadooppb.CipherOptionProto{{Suite: hadooppb.CipherSuiteProto_AES_CTR_NOPADDING.Enum()}}
	}
	if err := writeHandshake(conn, resp); err != nil {
		return nil, err
	}
	var done hadooppb.DataTransferEncryptorMessageProto
	if err := readHandshakeOK(br, &done); err != nil {
		return nil, err
	}
	layer, err := dc.finish(done.GetPayload())
	if err != nil {
		return nil, err
	}
	if opts := done.GetCipherOption(); len(opts) > 0 {
		o := opts[0]
		if len(resp.CipherOption) == 0 || o.GetSuite() != hadooppb.CipherSuiteProto_AES_CTR_NOPADDING || layer == nil {
			return nil, fmt.Errorf("the datanode chose cipher %v, which this client did not offer", o.GetSuite())
		}
		// The keys come wrapped by the security layer, in this order.
		inKey, err := layer.unwrap(o.GetInKey())
		if err != nil {
			return nil, fmt.Errorf("the datanode's AES key: %w", err)
		}
		outKey, err := layer.unwrap(o.GetOutKey())
		if err != nil {
			return nil, fmt.Errorf("the datanode's AES key: %w", err)
		}
		return newAESConn(conn, br, inKey, o.GetInIv(), outKey, o.GetOutIv())
	}
	if layer == nil {
		return &readerConn{Conn: conn, r: br}, nil
	}
	return newSASLStream(conn, br, layer, dc.serverMaxBuf), nil
}

// aesConn is a data-transfer connection encrypted with AES-CTR after the
// handshake: one key and IV (the initial counter) per direction.
type aesConn struct {
	net.Conn
	r   io.Reader
	enc cipher.Stream

	wmu sync.Mutex
	dec cipher.Stream
}

// newAESConn encrypts what is written with sendKey and sendIV and decrypts
// what is read with recvKey and recvIV.
func newAESConn(conn net.Conn, r io.Reader, sendKey, sendIV, recvKey, recvIV []byte) (*aesConn, error) {
	eb, err := aes.NewCipher(sendKey)
	if err != nil {
		return nil, fmt.Errorf("aes key: %w", err)
	}
	db, err := aes.NewCipher(recvKey)
	if err != nil {
		return nil, fmt.Errorf("aes key: %w", err)
	}
	if len(sendIV) != aes.BlockSize || len(recvIV) != aes.BlockSize {
		return nil, fmt.Errorf("aes IVs of %d and %d bytes, want %d", len(sendIV), len(recvIV), aes.BlockSize)
	}
	return &aesConn{Conn: conn, r: r, enc: cipher.NewCTR(eb, sendIV), dec: cipher.NewCTR(db, recvIV)}, nil
}

func (c *aesConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	out := make([]byte, len(p))
	c.enc.XORKeyStream(out, p)
	return c.Conn.Write(out)
}

func (c *aesConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.dec.XORKeyStream(p[:n], p[:n])
	return n, err
}

func delimited(m proto.Message) ([]byte, error) {
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append(binary.AppendUvarint(nil, uint64(len(b))), b...), nil
}

func writeHandshake(w io.Writer, m *hadooppb.DataTransferEncryptorMessageProto) error {
	b, err := delimited(m)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func readHandshake(br *bufio.Reader, m *hadooppb.DataTransferEncryptorMessageProto) error {
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return err
	}
	if n > maxHandshakeMessage {
		return fmt.Errorf("%w: handshake message of %d bytes", ErrPacketTooLarge, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return err
	}
	return proto.Unmarshal(b, m)
}

// readHandshakeOK reads a datanode's message and turns an error status
// into an error.
func readHandshakeOK(br *bufio.Reader, m *hadooppb.DataTransferEncryptorMessageProto) error {
	if err := readHandshake(br, m); err != nil {
		return fmt.Errorf("read the datanode's handshake message: %w", err)
	}
	if m.GetStatus() != hadooppb.DataTransferEncryptorMessageProto_SUCCESS {
		return fmt.Errorf("%w: %v: %s", ErrDataTransferRefused, m.GetStatus(), m.GetMessage())
	}
	return nil
}

// readerConn is a connection read through a buffered reader that may hold
// bytes already read from it.
type readerConn struct {
	net.Conn
	r io.Reader
}

func (c *readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// saslStream carries a connection's bytes as RFC 2831 wrapped messages, each
// behind a big-endian 4-byte length (Java's SaslInputStream and
// SaslOutputStream, which Hadoop's data-transfer protection uses).
type saslStream struct {
	net.Conn
	r       io.Reader
	layer   securityLayer
	maxSend int

	wmu  sync.Mutex
	rbuf []byte
}

func newSASLStream(conn net.Conn, r io.Reader, layer securityLayer, peerMaxBuf int) *saslStream {
	return &saslStream{Conn: conn, r: r, layer: layer, maxSend: sendSize(peerMaxBuf)}
}

func (c *saslStream) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return writeWrapped(c.Conn, p, c.maxSend, c.layer, func(tok []byte) ([]byte, error) {
		return append(binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(tok)), uint32(len(tok))), tok...), nil
	})
}

func (c *saslStream) Read(p []byte) (int, error) {
	for len(c.rbuf) == 0 {
		var hdr [4]byte
		if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
			return 0, err
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > DefaultMaxPacketSize {
			return 0, fmt.Errorf("%w: a wrapped message of %d bytes", ErrPacketTooLarge, n)
		}
		tok := make([]byte, n)
		if _, err := io.ReadFull(c.r, tok); err != nil {
			return 0, err
		}
		msg, err := c.layer.unwrap(tok)
		if err != nil {
			return 0, err
		}
		c.rbuf = msg
	}
	n := copy(p, c.rbuf)
	c.rbuf = c.rbuf[n:]
	return n, nil
}

// The data-transfer operations whose block token DataTransferDial reads.
const (
	opWriteBlock    = 0x50
	opReadBlock     = 0x51
	opBlockChecksum = 0x55
)

// DataTransferDial returns a dial function for datanode connections that
// runs the data-transfer SASL handshake of dfs.data.transfer.protection
// (at the levels of protection, in order of preference) for a client that
// does not, such as colinmarc/hdfs through its datanode dial hook. The
// handshake needs the block token of the operation the connection is for,
// which the client writes first: each connection holds that operation
// back, runs the handshake with its token, and sends it and everything
// after through the security layer negotiated. A connection whose client
// opens the handshake itself, or to a privileged port (a datanode secured
// by its port, where Hadoop's clients skip SASL), is left alone.
func DataTransferDial(dial DialFunc, cfg DataTransferConfig) (DialFunc, error) {
	if _, err := ParseProtection(cfg.Protection); err != nil {
		return nil, fmt.Errorf("%s: %w", settingDataTransfer, err)
	}
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if a, ok := c.RemoteAddr().(*net.TCPAddr); ok && a.Port < 1024 {
			return c, nil
		}
		return &transferConn{Conn: c, cfg: cfg}, nil
	}, nil
}

// transferConn holds a client's first operation back until the handshake
// with its block token is done.
type transferConn struct {
	net.Conn
	cfg DataTransferConfig

	mu        sync.Mutex
	pending   []byte
	protected net.Conn // set once the first operation went through
}

func (c *transferConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.protected != nil {
		return c.protected.Write(p)
	}
	c.pending = append(c.pending, p...)
	if len(c.pending) >= 4 && binary.BigEndian.Uint32(c.pending) == DataTransferMagic {
		// The client runs the handshake itself.
		c.protected = c.Conn
		_, err := c.Conn.Write(c.pending)
		c.pending = nil
		return len(p), err
	}
	tok, complete, err := firstOpToken(c.pending)
	if err != nil {
		return 0, err
	}
	if !complete {
		return len(p), nil
	}
	pc, err := DataTransferHandshake(c.Conn, tok, c.cfg)
	if err != nil {
		return 0, fmt.Errorf("data-transfer handshake with %s: %w", c.Conn.RemoteAddr(), err)
	}
	c.protected = pc
	_, err = pc.Write(c.pending)
	c.pending = nil
	return len(p), err
}

func (c *transferConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	pc := c.protected
	c.mu.Unlock()
	if pc == nil {
		return 0, errors.New("hadooprpc: read from a datanode connection before its first operation")
	}
	return pc.Read(p)
}

// firstOpToken returns the block token of the operation that starts b
// (version, op code, varint-delimited message), or complete false while b
// does not hold all of it.
func firstOpToken(b []byte) (tok Token, complete bool, err error) {
	if len(b) < 4 {
		return tok, false, nil
	}
	n, k := binary.Uvarint(b[3:])
	if k == 0 {
		return tok, false, nil
	}
	if k < 0 || n > maxHandshakeMessage {
		return tok, false, fmt.Errorf("%w: a data-transfer operation of %d bytes", ErrMalformedPacket, n)
	}
	if len(b) < 3+k+int(n) {
		return tok, false, nil
	}
	msg := b[3+k : 3+k+int(n)]
	var tp *hadooppb.TokenProto
	switch b[2] {
	case opReadBlock:
		var op hadooppb.OpReadBlockProto
		err = proto.Unmarshal(msg, &op)
		tp = op.GetHeader().GetBaseHeader().GetToken()
	case opWriteBlock:
		var op hadooppb.OpWriteBlockProto
		err = proto.Unmarshal(msg, &op)
		tp = op.GetHeader().GetBaseHeader().GetToken()
	case opBlockChecksum:
		var op hadooppb.OpBlockChecksumProto
		err = proto.Unmarshal(msg, &op)
		tp = op.GetHeader().GetToken()
	default:
		return tok, false, fmt.Errorf("%w: data-transfer operation 0x%02x, which this dialer cannot authenticate", ErrMalformedPacket, b[2])
	}
	if err != nil {
		return tok, false, fmt.Errorf("%w: data-transfer operation 0x%02x: %v", ErrMalformedPacket, b[2], err)
	}
	return TokenFromProto(tp), true, nil
}
