package hadooprpc

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
)

// DialFunc opens a network connection.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// SASLDial returns a dial function that gives a Hadoop RPC client which
// speaks only simple authentication (colinmarc/hdfs's namenode
// connections, whose dial hook this fits) the SASL authentication auth
// runs, and the security layer it negotiates. Each connection it opens
// sends a connection header asking for SASL and runs the negotiation at
// once; then it carries the client's stream, less the client's own
// connection header, and, when auth is a TokenAuth, with the user taken
// out of the client's connection context: a token names its user, and a
// Hadoop server refuses a token connection that claims another.
func SASLDial(dial DialFunc, auth ClientSASL) DialFunc {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	token := isToken(auth)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		raw, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		stop := context.AfterFunc(ctx, func() { raw.Close() })
		conn, err := saslHandshake(ctx, raw, addr, auth)
		if !stop() && err == nil {
			err = ctx.Err()
		}
		if err != nil {
			raw.Close()
			return nil, fmt.Errorf("authenticate to %s: %w", addr, err)
		}
		return &saslDialedConn{Conn: conn, dropUser: token}, nil
	}
}

func saslHandshake(ctx context.Context, conn net.Conn, addr string, auth ClientSASL) (net.Conn, error) {
	if _, err := conn.Write(header{version: Version, auth: AuthSASL}.bytes()); err != nil {
		return nil, err
	}
	id := make([]byte, 16)
	rand.Read(id)
	ex := &SASLExchange{conn: conn, max: DefaultMaxPacketSize, clientID: id, dialed: addr}
	if err := auth.Negotiate(ctx, ex); err != nil {
		return nil, fmt.Errorf("sasl: %w", err)
	}
	return ex.protect(conn), nil
}

// saslDialedConn hides the SASL the dialer ran from the client: it drops
// the client's connection header and rewrites its connection context.
type saslDialedConn struct {
	net.Conn
	dropUser bool

	pending []byte // the client's bytes until its connection context is whole
	through bool   // the context has been sent; pass everything on
}

func (c *saslDialedConn) Write(p []byte) (int, error) {
	if c.through {
		return c.Conn.Write(p)
	}
	c.pending = append(c.pending, p...)
	if len(c.pending) < 7+4 {
		return len(p), nil
	}
	h, err := readHeaderBytes(c.pending[:7])
	if err != nil {
		return 0, err
	}
	if h.auth != AuthNone {
		return 0, errors.New("hadooprpc: the client runs its own authentication over a SASL dialer")
	}
	n := int(binary.BigEndian.Uint32(c.pending[7:11]))
	if n > DefaultMaxPacketSize {
		return 0, fmt.Errorf("%w: connection context of %d bytes", ErrPacketTooLarge, n)
	}
	if len(c.pending) < 11+n {
		return len(p), nil
	}
	pkt, err := c.rewriteContext(c.pending[11 : 11+n])
	if err != nil {
		return 0, err
	}
	rest := c.pending[11+n:]
	c.pending, c.through = nil, true
	if _, err := c.Conn.Write(append(pkt, rest...)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// rewriteContext returns the client's connection-context packet, without
// its user when the connection authenticated with a token.
func (c *saslDialedConn) rewriteContext(body []byte) ([]byte, error) {
	var rh hadooppb.RpcRequestHeaderProto
	rest, err := unmarshalNext(body, &rh)
	if err != nil {
		return nil, fmt.Errorf("the client's connection context: %w", err)
	}
	if rh.GetCallId() != CallIDConnectionContext {
		return nil, fmt.Errorf("%w: the client sent call %d before its connection context", ErrMalformedPacket, rh.GetCallId())
	}
	var cc hadooppb.IpcConnectionContextProto
	if _, err := unmarshalNext(rest, &cc); err != nil {
		return nil, fmt.Errorf("the client's connection context: %w", err)
	}
	if c.dropUser {
		cc.UserInfo = nil
	}
	return marshalPacket(&rh, proto.Message(&cc))
}

func readHeaderBytes(b []byte) (header, error) {
	if string(b[:4]) != magic {
		return header{}, fmt.Errorf("%w: magic %q", ErrBadHeader, b[:4])
	}
	return header{version: b[4], serviceClass: b[5], auth: AuthProtocol(b[6])}, nil
}
