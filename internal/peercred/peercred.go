package peercred

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"google.golang.org/grpc/credentials"
)

const (
	magic     = "SPC1"
	nonceLen  = 32
	macLen    = sha256.Size
	authType  = "spindle-peer"
	handshake = 10 * time.Second // a server's bound on a handshake
)

// ErrRefused is wrapped by the error of a handshake whose proof failed.
var ErrRefused = errors.New("peercred: peer proof refused")

// MinTokenLen is the shortest token accepted.
const MinTokenLen = 16

// Credentials are gRPC transport credentials proving, both ways, that each
// end holds the token. purpose separates the uses of one token: a proof
// made for one purpose fails for another.
type Credentials struct {
	token   []byte
	purpose string
}

var _ credentials.TransportCredentials = (*Credentials)(nil)

// New returns the credentials of token for purpose.
func New(token, purpose string) (*Credentials, error) {
	if len(token) < MinTokenLen {
		return nil, fmt.Errorf("peercred: token of %d bytes: need at least %d", len(token), MinTokenLen)
	}
	return &Credentials{token: []byte(token), purpose: purpose}, nil
}

// AuthInfo is what a handshake established.
type AuthInfo struct{ credentials.CommonAuthInfo }

// AuthType implements credentials.AuthInfo.
func (AuthInfo) AuthType() string { return authType }

func (c *Credentials) mac(side string, first, second []byte) []byte {
	h := hmac.New(sha256.New, c.token)
	io.WriteString(h, c.purpose)
	h.Write([]byte{0})
	io.WriteString(h, side)
	h.Write(first)
	h.Write(second)
	return h.Sum(nil)
}

func info() AuthInfo {
	return AuthInfo{credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}
}

// ClientHandshake implements credentials.TransportCredentials.
func (c *Credentials) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
		defer conn.SetDeadline(time.Time{})
	}
	hello := make([]byte, len(magic)+nonceLen)
	if _, err := io.ReadFull(conn, hello); err != nil {
		return nil, nil, fmt.Errorf("peer handshake with %s: read its nonce: %w", authority, err)
	}
	if string(hello[:len(magic)]) != magic {
		return nil, nil, fmt.Errorf("peer handshake with %s: not a Spindle peer endpoint", authority)
	}
	serverNonce := hello[len(magic):]
	reply := make([]byte, nonceLen, nonceLen+macLen)
	rand.Read(reply)
	clientNonce := reply[:nonceLen:nonceLen]
	reply = append(reply, c.mac("client", serverNonce, clientNonce)...)
	if _, err := conn.Write(reply); err != nil {
		return nil, nil, fmt.Errorf("peer handshake with %s: send proof: %w", authority, err)
	}
	proof := make([]byte, macLen)
	if _, err := io.ReadFull(conn, proof); err != nil {
		return nil, nil, fmt.Errorf("%w: %s closed the connection on our proof (is the peer token the same on every rank?)", ErrRefused, authority)
	}
	if !hmac.Equal(proof, c.mac("server", clientNonce, serverNonce)) {
		return nil, nil, fmt.Errorf("%w: %s does not hold the job's peer token", ErrRefused, authority)
	}
	return conn, info(), nil
}

// ServerHandshake implements credentials.TransportCredentials.
func (c *Credentials) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn.SetDeadline(time.Now().Add(handshake))
	defer conn.SetDeadline(time.Time{})
	hello := make([]byte, len(magic)+nonceLen)
	copy(hello, magic)
	rand.Read(hello[len(magic):])
	serverNonce := hello[len(magic):]
	if _, err := conn.Write(hello); err != nil {
		return nil, nil, fmt.Errorf("peer handshake with %s: %w", conn.RemoteAddr(), err)
	}
	reply := make([]byte, nonceLen+macLen)
	if _, err := io.ReadFull(conn, reply); err != nil {
		return nil, nil, fmt.Errorf("peer handshake with %s: read its proof: %w", conn.RemoteAddr(), err)
	}
	clientNonce := reply[:nonceLen]
	if !hmac.Equal(reply[nonceLen:], c.mac("client", serverNonce, clientNonce)) {
		return nil, nil, fmt.Errorf("%w: %s does not hold the job's peer token", ErrRefused, conn.RemoteAddr())
	}
	if _, err := conn.Write(c.mac("server", clientNonce, serverNonce)); err != nil {
		return nil, nil, fmt.Errorf("peer handshake with %s: send proof: %w", conn.RemoteAddr(), err)
	}
	return conn, info(), nil
}

// Info implements credentials.TransportCredentials.
func (c *Credentials) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: authType}
}

// Clone implements credentials.TransportCredentials.
func (c *Credentials) Clone() credentials.TransportCredentials {
	return &Credentials{token: append([]byte(nil), c.token...), purpose: c.purpose}
}

// OverrideServerName implements credentials.TransportCredentials; the
// proof does not depend on names.
func (c *Credentials) OverrideServerName(string) error { return nil }
