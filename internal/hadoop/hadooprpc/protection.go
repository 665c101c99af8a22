package hadooprpc

import (
	"crypto/hmac"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"

	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/types"
	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
)

// The levels of hadoop.rpc.protection.
const (
	// ProtectionAuthentication authenticates the connection only.
	ProtectionAuthentication = "authentication"
	// ProtectionIntegrity also signs every message after the handshake.
	ProtectionIntegrity = "integrity"
	// ProtectionPrivacy also encrypts every message after the handshake.
	ProtectionPrivacy = "privacy"
)

// The RFC 4752 security-layer bits, one per level.
const (
	qopAuthentication = 1
	qopIntegrity      = 2
	qopPrivacy        = 4
)

// ErrProtection means the two ends of a connection have no level of
// protection in common (hadoop.rpc.protection, dfs.data.transfer.protection),
// such as a server that requires privacy and a client configured for
// authentication only.
var ErrProtection = errors.New("hadooprpc: no common level of protection")

// ParseProtection parses hadoop.rpc.protection: a comma-separated list of
// authentication, integrity and privacy, in order of preference. Empty
// means authentication, Hadoop's default.
func ParseProtection(s string) ([]byte, error) {
	var out []byte
	for _, f := range strings.Split(s, ",") {
		var bit byte
		switch strings.ToLower(strings.TrimSpace(f)) {
		case "":
			continue
		case ProtectionAuthentication:
			bit = qopAuthentication
		case ProtectionIntegrity:
			bit = qopIntegrity
		case ProtectionPrivacy:
			bit = qopPrivacy
		default:
			return nil, fmt.Errorf("hadoop.rpc.protection %q: %q is not authentication, integrity or privacy", s, strings.TrimSpace(f))
		}
		out = append(out, bit)
	}
	if len(out) == 0 {
		out = []byte{qopAuthentication}
	}
	return out, nil
}

// protectionNames names the levels of a security-layer bit mask.
func protectionNames(mask byte) string {
	var names []string
	for _, l := range []struct {
		bit  byte
		name string
	}{{qopAuthentication, ProtectionAuthentication}, {qopIntegrity, ProtectionIntegrity}, {qopPrivacy, ProtectionPrivacy}} {
		if mask&l.bit != 0 {
			names = append(names, l.name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// maxWrapBuffer is the largest wrapped message this package accepts, as
// announced in the security-layer exchange (Java's GSSAPI default).
const maxWrapBuffer = 1 << 16

// wrapOverhead bounds what a wrap token adds to its message (header,
// confounder, encrypted header copy and checksum).
const wrapOverhead = 128

// securityLayer protects the messages of a connection after a SASL
// exchange negotiated integrity or privacy: Kerberos's RFC 4121 wrap
// tokens (gssLayer) or DIGEST-MD5's RFC 2831 MACs and ciphers
// (digestLayer).
type securityLayer interface {
	// wrap protects one message for the other end.
	wrap(msg []byte) ([]byte, error)
	// unwrap checks one message from the other end, in turn, and returns
	// its content.
	unwrap(tok []byte) ([]byte, error)
	// level is qopIntegrity or qopPrivacy.
	level() byte
}

var (
	_ securityLayer = (*gssLayer)(nil)
	_ securityLayer = (*digestLayer)(nil)
)

// gssLayer is the RFC 4121 security layer a Kerberos connection runs at
// integrity or privacy: every message is a GSS wrap token, signed, and
// sealed (encrypted) for privacy.
type gssLayer struct {
	key      types.EncryptionKey
	acceptor bool // this end accepted the context (the server)
	privacy  bool

	mu      sync.Mutex
	sendSeq uint64
	recvSeq uint64
	recvAny bool
}

// wrap token flags (RFC 4121 4.2.2).
const (
	flagSentByAcceptor = 0x01
	flagSealed         = 0x02
	flagAcceptorSubkey = 0x04
)

func (l *gssLayer) level() byte {
	if l.privacy {
		return qopPrivacy
	}
	return qopIntegrity
}

func (l *gssLayer) usage(sending bool) uint32 {
	if sending == l.acceptor {
		return keyusage.GSSAPI_ACCEPTOR_SEAL
	}
	return keyusage.GSSAPI_INITIATOR_SEAL
}

// wrap makes one wrap token of msg.
func (l *gssLayer) wrap(msg []byte) ([]byte, error) {
	l.mu.Lock()
	seq := l.sendSeq
	l.sendSeq++
	l.mu.Unlock()
	var flags byte
	if l.acceptor {
		flags |= flagSentByAcceptor
	}
	et, err := crypto.GetEtype(l.key.KeyType)
	if err != nil {
		return nil, fmt.Errorf("kerberos: session key type %d: %w", l.key.KeyType, err)
	}
	hdr := make([]byte, 16, 16+len(msg)+wrapOverhead)
	hdr[0], hdr[1], hdr[3] = 0x05, 0x04, 0xff
	binary.BigEndian.PutUint64(hdr[8:], seq)
	if l.privacy {
		hdr[2] = flags | flagSealed
		// {header | E(message | header)}, no filler, RRC 0 (RFC 4121 4.2.4).
		plain := append(append(make([]byte, 0, len(msg)+16), msg...), hdr...)
		_, ct, err := et.EncryptMessage(l.key.KeyValue, plain, l.usage(true))
		if err != nil {
			return nil, fmt.Errorf("kerberos: seal a message: %w", err)
		}
		return append(hdr, ct...), nil
	}
	hdr[2] = flags
	// {header | message | checksum}, the checksum over message | header
	// with EC and RRC zero.
	sum, err := et.GetChecksumHash(l.key.KeyValue, append(append(make([]byte, 0, len(msg)+16), msg...), hdr...), l.usage(true))
	if err != nil {
		return nil, fmt.Errorf("kerberos: sign a message: %w", err)
	}
	binary.BigEndian.PutUint16(hdr[4:6], uint16(len(sum)))
	return append(append(hdr, msg...), sum...), nil
}

// unwrap checks one wrap token from the other end and returns its message.
func (l *gssLayer) unwrap(tok []byte) ([]byte, error) {
	if len(tok) < 16 || tok[0] != 0x05 || tok[1] != 0x04 || tok[3] != 0xff {
		return nil, errors.New("kerberos: not a GSS wrap token")
	}
	flags := tok[2]
	if (flags&flagSentByAcceptor != 0) == l.acceptor {
		return nil, errors.New("kerberos: a wrap token from the wrong end of the connection")
	}
	if flags&flagAcceptorSubkey != 0 {
		return nil, errors.New("kerberos: wrap token under an acceptor subkey, which was not negotiated")
	}
	if sealed := flags&flagSealed != 0; sealed != l.privacy {
		return nil, fmt.Errorf("kerberos: wrap token sealed=%v on a connection negotiated at %s", sealed, map[bool]string{true: ProtectionPrivacy, false: ProtectionIntegrity}[l.privacy])
	}
	ec := int(binary.BigEndian.Uint16(tok[4:6]))
	rrc := int(binary.BigEndian.Uint16(tok[6:8]))
	seq := binary.BigEndian.Uint64(tok[8:16])
	body := tok[16:]
	if rrc > 0 && len(body) > 0 {
		// Undo the right rotation some senders apply (RFC 4121 4.2.5).
		r := rrc % len(body)
		body = append(append([]byte{}, body[r:]...), body[:r]...)
	}
	et, err := crypto.GetEtype(l.key.KeyType)
	if err != nil {
		return nil, fmt.Errorf("kerberos: session key type %d: %w", l.key.KeyType, err)
	}
	if l.privacy {
		plain, err := et.DecryptMessage(l.key.KeyValue, body, l.usage(false))
		if err != nil {
			return nil, fmt.Errorf("kerberos: a sealed message does not decrypt: %w", err)
		}
		if len(plain) < 16+ec {
			return nil, errors.New("kerberos: sealed message too short")
		}
		inner := plain[len(plain)-16:]
		// The encrypted copy of the header must match, RRC aside.
		if !hmac.Equal(inner[:6], tok[:6]) || !hmac.Equal(inner[8:16], tok[8:16]) {
			return nil, errors.New("kerberos: a sealed message's header was altered")
		}
		return l.inOrder(seq, plain[:len(plain)-16-ec])
	}
	if ec > len(body) {
		return nil, errors.New("kerberos: signed message shorter than its checksum")
	}
	msg, sum := body[:len(body)-ec], body[len(body)-ec:]
	hdr := append([]byte{}, tok[:16]...)
	hdr[4], hdr[5], hdr[6], hdr[7] = 0, 0, 0, 0
	want, err := et.GetChecksumHash(l.key.KeyValue, append(append(make([]byte, 0, len(msg)+16), msg...), hdr...), l.usage(false))
	if err != nil {
		return nil, fmt.Errorf("kerberos: check a signed message: %w", err)
	}
	if !hmac.Equal(want, sum) {
		return nil, errors.New("kerberos: a signed message's checksum does not match (altered on the way?)")
	}
	return l.inOrder(seq, msg)
}

// inOrder refuses a replayed, dropped or reordered message: sequence
// numbers go up by one from the first.
func (l *gssLayer) inOrder(seq uint64, msg []byte) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.recvAny && seq != l.recvSeq+1 {
		return nil, fmt.Errorf("kerberos: message %d after %d (replayed or reordered)", seq, l.recvSeq)
	}
	l.recvAny, l.recvSeq = true, seq
	return msg, nil
}

// wrapConn carries a connection's IPC stream inside SASL WRAP messages
// (call id -33), as Hadoop does once integrity or privacy is negotiated:
// what the rest of the package writes is cut into wrap tokens, and what
// it reads is the concatenation of the unwrapped messages.
type wrapConn struct {
	net.Conn
	layer    securityLayer
	server   bool
	clientID []byte
	max      int // largest packet read
	maxSend  int // largest message wrapped at once

	wmu  sync.Mutex
	rbuf []byte
}

func (c *wrapConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return writeWrapped(c.Conn, p, c.maxSend, c.layer, func(tok []byte) ([]byte, error) {
		var hdr proto.Message
		if c.server {
			hdr = &hadooppb.RpcResponseHeaderProto{
				CallId: proto.Uint32(wireCallID(CallIDSASL)), Status: hadooppb.RpcResponseHeaderProto_SUCCESS.Enum(),
				ServerIpcVersionNum: proto.Uint32(Version),
			}
		} else {
			hdr = requestHeader(CallIDSASL, c.clientID)
		}
		return marshalPacket(hdr, &hadooppb.RpcSaslProto{State: hadooppb.RpcSaslProto_WRAP.Enum(), Token: tok})
	})
}

// writeWrapped cuts p into pieces of at most maxSend bytes, protects each
// with layer and writes it to w framed as frame makes it.
func writeWrapped(w io.Writer, p []byte, maxSend int, layer securityLayer, frame func(tok []byte) ([]byte, error)) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), maxSend)]
		tok, err := layer.wrap(chunk)
		if err != nil {
			return n, err
		}
		pkt, err := frame(tok)
		if err != nil {
			return n, err
		}
		if _, err := w.Write(pkt); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

func (c *wrapConn) Read(p []byte) (int, error) {
	for len(c.rbuf) == 0 {
		body, err := readPacket(c.Conn, c.max)
		if err != nil {
			return 0, err
		}
		if c.server {
			var hdr hadooppb.RpcRequestHeaderProto
			packet := body
			if body, err = unmarshalNext(body, &hdr); err != nil {
				return 0, err
			}
			if hdr.GetCallId() != CallIDSASL {
				// Hadoop's server takes a packet that is not a SASL WRAP
				// message as it is, even on a connection whose SASL
				// negotiated integrity or privacy (colinmarc/hdfs sends
				// its calls so); only WRAP messages must unwrap. Its
				// answers are wrapped all the same.
				c.rbuf = binary.BigEndian.AppendUint32(nil, uint32(len(packet)))
				c.rbuf = append(c.rbuf, packet...)
				continue
			}
		} else {
			var hdr hadooppb.RpcResponseHeaderProto
			if body, err = unmarshalNext(body, &hdr); err != nil {
				return 0, err
			}
			if hdr.GetStatus() != hadooppb.RpcResponseHeaderProto_SUCCESS {
				return 0, &RemoteError{Class: hdr.GetExceptionClassName(), Message: hdr.GetErrorMsg(), Code: hdr.GetErrorDetail(), Fatal: true}
			}
			if int32(hdr.GetCallId()) != CallIDSASL {
				return 0, fmt.Errorf("%w: an unwrapped response (call id %d) on a connection protected by SASL", ErrMalformedPacket, int32(hdr.GetCallId()))
			}
		}
		var msg hadooppb.RpcSaslProto
		if _, err := unmarshalNext(body, &msg); err != nil {
			return 0, err
		}
		if msg.GetState() != hadooppb.RpcSaslProto_WRAP {
			return 0, fmt.Errorf("%w: SASL %v on a protected connection, want WRAP", ErrMalformedPacket, msg.GetState())
		}
		if c.rbuf, err = c.layer.unwrap(msg.GetToken()); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.rbuf)
	c.rbuf = c.rbuf[n:]
	return n, nil
}

// securityLayerPayload is the 4-byte RFC 4752 security-layer message: a
// bit mask of levels and a maximum message size.
func securityLayerPayload(mask byte, maxSize int) []byte {
	return []byte{mask, byte(maxSize >> 16), byte(maxSize >> 8), byte(maxSize)}
}

// sendSize is how many bytes of the IPC stream fit in one wrap token for
// a peer that accepts maxSize-byte tokens (zero: no limit announced).
func sendSize(maxSize int) int {
	if maxSize <= 0 || maxSize > maxWrapBuffer {
		maxSize = maxWrapBuffer
	}
	// Half the size bounds what a layer adds even to small limits (a
	// DIGEST-MD5 layer adds at most 24 bytes, and maxbuf is at least 64).
	return max(maxSize-wrapOverhead, maxSize/2)
}
