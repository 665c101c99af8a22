package hadooprpc

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"google.golang.org/protobuf/proto"
)

// ErrClientClosed reports a call on a closed or broken client.
var ErrClientClosed = errors.New("hadooprpc: client closed")

// ClientConfig configures a Client.
type ClientConfig struct {
	// Addr is the server's host:port.
	Addr string
	// User is the effective user the connection acts for.
	User string
	// Protocol is the protocol class name declared on every call.
	Protocol string
	// ProtocolVersion is the declared protocol version; zero means 1.
	ProtocolVersion uint64
	// ClientID identifies the client (16 random bytes when nil).
	ClientID []byte
	// Dial opens the connection; nil uses a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// SASL, when set, makes the connection ask for SASL and runs it.
	SASL ClientSASL
	// MaxPacketSize bounds response packets; zero means DefaultMaxPacketSize.
	MaxPacketSize int
}

// Client is one connection to a Hadoop IPC server. Calls may be made
// concurrently; responses are matched to them by call id.
type Client struct {
	cfg  ClientConfig
	conn net.Conn

	writeMu    sync.Mutex
	mu         sync.Mutex
	nextID     int32
	pending    map[int32]chan result
	err        error // set once the connection breaks
	done       chan struct{}
	readerDone chan struct{}
}

type result struct {
	hdr  *hadooppb.RpcResponseHeaderProto
	body []byte
}

// Dial connects to cfg.Addr and sends the connection header and context.
func Dial(ctx context.Context, cfg ClientConfig) (*Client, error) {
	if cfg.User == "" && !isToken(cfg.SASL) {
		return nil, errors.New("hadooprpc: dial: no user")
	}
	if cfg.ProtocolVersion == 0 {
		cfg.ProtocolVersion = 1
	}
	if cfg.MaxPacketSize <= 0 {
		cfg.MaxPacketSize = DefaultMaxPacketSize
	}
	if cfg.ClientID == nil {
		cfg.ClientID = make([]byte, 16)
		rand.Read(cfg.ClientID)
	}
	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	conn, err := dial(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.Addr, err)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	c, err := handshakeClient(ctx, conn, cfg)
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("connect to %s: %w", cfg.Addr, err)
	}
	go func() {
		defer close(c.readerDone)
		c.readLoop()
	}()
	return c, nil
}

func handshakeClient(ctx context.Context, conn net.Conn, cfg ClientConfig) (*Client, error) {
	h := header{version: Version, auth: AuthNone}
	if cfg.SASL != nil {
		h.auth = AuthSASL
	}
	if _, err := conn.Write(h.bytes()); err != nil {
		return nil, err
	}
	if cfg.SASL != nil {
		ex := &SASLExchange{conn: conn, max: cfg.MaxPacketSize, clientID: cfg.ClientID, dialed: cfg.Addr}
		if err := cfg.SASL.Negotiate(ctx, ex); err != nil {
			return nil, fmt.Errorf("sasl: %w", err)
		}
		conn = ex.protect(conn)
	}
	cc := &hadooppb.IpcConnectionContextProto{Protocol: proto.String(cfg.Protocol)}
	if !isToken(cfg.SASL) {
		// A token names its user itself; Hadoop clients send no user
		// beside it (a different one would ask to be a proxy user).
		cc.UserInfo = &hadooppb.UserInformationProto{EffectiveUser: proto.String(cfg.User)}
	}
	pkt, err := marshalPacket(requestHeader(CallIDConnectionContext, cfg.ClientID), cc)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write(pkt); err != nil {
		return nil, err
	}
	return &Client{cfg: cfg, conn: conn, pending: map[int32]chan result{}, done: make(chan struct{}), readerDone: make(chan struct{})}, nil
}

func requestHeader(id int32, clientID []byte) *hadooppb.RpcRequestHeaderProto {
	if clientID == nil {
		clientID = []byte{}
	}
	return &hadooppb.RpcRequestHeaderProto{
		RpcKind:  hadooppb.RpcKindProto_RPC_PROTOCOL_BUFFER.Enum(),
		RpcOp:    hadooppb.RpcRequestHeaderProto_RPC_FINAL_PACKET.Enum(),
		CallId:   proto.Int32(id),
		ClientId: clientID,
	}
}

// Addr returns the server address.
func (c *Client) Addr() string { return c.cfg.Addr }

// Call invokes method with req and fills resp. A failed call returns a
// *RemoteError carrying the server's exception class.
func (c *Client) Call(ctx context.Context, method string, req, resp proto.Message) error {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return fmt.Errorf("%s to %s: %w", method, c.cfg.Addr, err)
	}
	id := c.nextID
	c.nextID++
	if c.nextID < 0 {
		c.nextID = 0
	}
	ch := make(chan result, 1)
	c.pending[id] = ch
	c.mu.Unlock()

	rh := &hadooppb.RequestHeaderProto{
		MethodName:                 proto.String(method),
		DeclaringClassProtocolName: proto.String(c.cfg.Protocol),
		ClientProtocolVersion:      proto.Uint64(c.cfg.ProtocolVersion),
	}
	pkt, err := marshalPacket(requestHeader(id, c.cfg.ClientID), rh, req)
	if err != nil {
		c.forget(id)
		return fmt.Errorf("marshal %s request: %w", method, err)
	}
	c.writeMu.Lock()
	_, err = c.conn.Write(pkt)
	c.writeMu.Unlock()
	if err != nil {
		c.forget(id)
		c.fail(err)
		return fmt.Errorf("%s to %s: %w", method, c.cfg.Addr, err)
	}

	select {
	case r := <-ch:
		return c.decode(method, r, resp)
	case <-ctx.Done():
		c.forget(id)
		return fmt.Errorf("%s to %s: %w", method, c.cfg.Addr, ctx.Err())
	case <-c.done:
		// The reader may have delivered just before failing.
		select {
		case r := <-ch:
			return c.decode(method, r, resp)
		default:
		}
		c.mu.Lock()
		err := c.err
		c.mu.Unlock()
		return fmt.Errorf("%s to %s: %w", method, c.cfg.Addr, err)
	}
}

func (c *Client) decode(method string, r result, resp proto.Message) error {
	if r.hdr.GetStatus() != hadooppb.RpcResponseHeaderProto_SUCCESS {
		return &RemoteError{
			Method:  method,
			Class:   r.hdr.GetExceptionClassName(),
			Message: r.hdr.GetErrorMsg(),
			Code:    r.hdr.GetErrorDetail(),
			Fatal:   r.hdr.GetStatus() == hadooppb.RpcResponseHeaderProto_FATAL,
		}
	}
	if _, err := unmarshalNext(r.body, resp); err != nil {
		return fmt.Errorf("%s response from %s: %w", method, c.cfg.Addr, err)
	}
	return nil
}

func (c *Client) forget(id int32) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

func (c *Client) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		close(c.done)
	}
	c.conn.Close()
}

func (c *Client) readLoop() {
	for {
		body, err := readPacket(c.conn, c.cfg.MaxPacketSize)
		if err != nil {
			c.fail(fmt.Errorf("%w: %v", ErrClientClosed, err))
			return
		}
		hdr := &hadooppb.RpcResponseHeaderProto{}
		rest, err := unmarshalNext(body, hdr)
		if err != nil {
			c.fail(err)
			return
		}
		id := int32(hdr.GetCallId())
		c.mu.Lock()
		ch, ok := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ok {
			ch <- result{hdr: hdr, body: rest}
		}
		if hdr.GetStatus() == hadooppb.RpcResponseHeaderProto_FATAL {
			c.fail(&RemoteError{Class: hdr.GetExceptionClassName(), Message: hdr.GetErrorMsg(), Code: hdr.GetErrorDetail(), Fatal: true})
			return
		}
	}
}

// Close closes the connection, fails pending calls and waits for the
// response reader to stop.
func (c *Client) Close() error {
	c.fail(ErrClientClosed)
	<-c.readerDone
	return nil
}
