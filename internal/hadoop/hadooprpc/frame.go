package hadooprpc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"
)

// Version is the IPC version this package speaks (Hadoop 2 and later).
const Version = 9

// magic opens every connection.
const magic = "hrpc"

// AuthProtocol is the last byte of the connection header.
type AuthProtocol byte

// The auth protocols a connection header can ask for.
const (
	// AuthNone is simple authentication: the connection context names the user.
	AuthNone AuthProtocol = 0x00
	// AuthSASL runs a SASL exchange before the connection context.
	AuthSASL AuthProtocol = 0xdf
)

// Call ids with a meaning of their own.
const (
	// CallIDConnectionContext carries the IpcConnectionContextProto.
	CallIDConnectionContext int32 = -3
	// CallIDPing is a keep-alive that gets no response.
	CallIDPing int32 = -4
	// CallIDSASL carries RpcSaslProto messages.
	CallIDSASL int32 = -33
)

// DefaultMaxPacketSize bounds a packet (Hadoop's ipc.maximum.data.length).
const DefaultMaxPacketSize = 64 << 20

// Sentinel errors of the framing layer.
var (
	// ErrBadHeader reports a connection that did not open with a Hadoop IPC header.
	ErrBadHeader = errors.New("hadooprpc: bad connection header")
	// ErrPacketTooLarge reports a packet longer than the configured maximum.
	ErrPacketTooLarge = errors.New("hadooprpc: packet too large")
	// ErrMalformedPacket reports a packet whose delimited messages do not parse.
	ErrMalformedPacket = errors.New("hadooprpc: malformed packet")
)

// header is the 7-byte connection header.
type header struct {
	version      byte
	serviceClass byte
	auth         AuthProtocol
}

func (h header) bytes() []byte {
	return []byte{magic[0], magic[1], magic[2], magic[3], h.version, h.serviceClass, byte(h.auth)}
}

func readHeader(r io.Reader) (header, error) {
	var b [7]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return header{}, fmt.Errorf("read connection header: %w", err)
	}
	if string(b[:4]) != magic {
		return header{}, fmt.Errorf("%w: magic %q", ErrBadHeader, b[:4])
	}
	return header{version: b[4], serviceClass: b[5], auth: AuthProtocol(b[6])}, nil
}

// appendDelimited appends msg, prefixed with its varint length, to buf.
func appendDelimited(buf []byte, msg proto.Message) ([]byte, error) {
	size := proto.Size(msg)
	buf = binary.AppendUvarint(buf, uint64(size))
	return proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(buf, msg)
}

// marshalPacket frames msgs as one packet: a big-endian uint32 length, then
// each message varint-delimited. A nil message is skipped.
func marshalPacket(msgs ...proto.Message) ([]byte, error) {
	buf := make([]byte, 4, 256)
	var err error
	for _, m := range msgs {
		if m == nil {
			continue
		}
		if buf, err = appendDelimited(buf, m); err != nil {
			return nil, err
		}
	}
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	return buf, nil
}

// readPacket reads one length-prefixed packet body.
func readPacket(r io.Reader, max int) ([]byte, error) {
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(lb[:])
	if int64(n) > int64(max) {
		return nil, fmt.Errorf("%w: %d bytes (limit %d)", ErrPacketTooLarge, n, max)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return body, nil
}

// nextDelimited splits the first varint-delimited message off body. At the
// end of body it returns ok false.
func nextDelimited(body []byte) (msg, rest []byte, ok bool, err error) {
	if len(body) == 0 {
		return nil, nil, false, nil
	}
	n, k := binary.Uvarint(body)
	if k <= 0 || n > uint64(len(body)-k) {
		return nil, nil, false, ErrMalformedPacket
	}
	return body[k : k+int(n)], body[k+int(n):], true, nil
}

// unmarshalNext parses the next delimited message of body into msg.
func unmarshalNext(body []byte, msg proto.Message) (rest []byte, err error) {
	raw, rest, ok, err := nextDelimited(body)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: missing %s", ErrMalformedPacket, msg.ProtoReflect().Descriptor().Name())
	}
	if err := proto.Unmarshal(raw, msg); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformedPacket, msg.ProtoReflect().Descriptor().Name(), err)
	}
	return rest, nil
}

// wireCallID converts a call id to the uint32 the response header carries
// (negative ids travel as their two's complement).
func wireCallID(id int32) uint32 { return uint32(id) }
