package hadooprpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"google.golang.org/protobuf/proto"
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Name labels the server in logs ("namenode", "resourcemanager").
	Name string
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// SASL authenticates connections that ask for it; nil refuses them.
	SASL SASL
	// MaxPacketSize bounds request packets; zero means DefaultMaxPacketSize.
	MaxPacketSize int
	// MaxCallsPerConn bounds the calls one connection runs at once; zero means 16.
	MaxCallsPerConn int
	// OnCall, when set, is told about every finished call, for metrics.
	OnCall func(protocol, method string, err error)
}

// Server serves Hadoop IPC on a listener, dispatching calls to its services.
type Server struct {
	cfg      ServerConfig
	log      *slog.Logger
	services map[string]*Service

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewServer returns a server for services.
func NewServer(cfg ServerConfig, services ...*Service) (*Server, error) {
	if cfg.MaxPacketSize <= 0 {
		cfg.MaxPacketSize = DefaultMaxPacketSize
	}
	if cfg.MaxCallsPerConn <= 0 {
		cfg.MaxCallsPerConn = 16
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:      cfg,
		log:      log.With("component", "hadooprpc", "server", cfg.Name),
		services: map[string]*Service{},
		conns:    map[net.Conn]struct{}{},
	}
	for _, svc := range services {
		if _, dup := s.services[svc.protocol]; dup {
			return nil, fmt.Errorf("hadooprpc: protocol %s registered twice", svc.protocol)
		}
		s.services[svc.protocol] = svc
	}
	return s, nil
}

// Serve accepts connections on ln until ctx ends or ln fails, then closes
// ln and every connection and waits for their goroutines. It returns nil
// when ctx ended it.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer s.shutdown()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("%s: accept on %s: %w", s.cfg.Name, ln.Addr(), err)
		}
		if !s.track(conn) {
			conn.Close()
			return nil
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.untrack(conn)
			s.serveConn(ctx, conn)
		}()
	}
}

// CloseConnections drops every open connection, as a crashed server would.
func (s *Server) CloseConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	c.Close()
}

func (s *Server) shutdown() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// serverConn is one client connection.
type serverConn struct {
	s      *Server
	conn   net.Conn
	caller Caller

	writeMu sync.Mutex
}

func (s *Server) serveConn(ctx context.Context, conn net.Conn) {
	c := &serverConn{s: s, conn: conn, caller: Caller{RemoteAddr: conn.RemoteAddr()}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var calls sync.WaitGroup
	defer calls.Wait()
	if err := c.handshake(ctx); err != nil {
		if !isClosed(err) {
			s.log.Warn("connection refused", "remote", conn.RemoteAddr(), "err", err)
		}
		return
	}
	sem := make(chan struct{}, s.cfg.MaxCallsPerConn)
	for {
		body, err := readPacket(c.conn, s.cfg.MaxPacketSize)
		if err != nil {
			if !isClosed(err) {
				s.log.Debug("connection ended", "remote", conn.RemoteAddr(), "err", err)
			}
			return
		}
		call, err := c.parseCall(body)
		if err != nil {
			c.fatal(call.id, hadooppb.RpcResponseHeaderProto_FATAL_DESERIALIZING_REQUEST, err)
			return
		}
		switch {
		case call.id == CallIDPing:
			continue
		case call.close:
			return
		case call.err != nil:
			c.respond(call, nil, call.err)
			continue
		}
		sem <- struct{}{}
		calls.Add(1)
		go func() {
			defer calls.Done()
			defer func() { <-sem }()
			cctx := WithCaller(ctx, call.caller)
			resp, err := call.m.call(cctx, call.req)
			if s.cfg.OnCall != nil {
				s.cfg.OnCall(call.protocol, call.method, err)
			}
			c.respond(call, resp, err)
		}()
	}
}

// handshake reads the connection header, runs SASL when asked, and reads
// the connection context.
func (c *serverConn) handshake(ctx context.Context) error {
	h, err := readHeader(c.conn)
	if err != nil {
		return err
	}
	if h.version != Version {
		err := fmt.Errorf("%w: IPC version %d, server speaks %d", ErrBadHeader, h.version, Version)
		c.fatal(-1, hadooppb.RpcResponseHeaderProto_FATAL_VERSION_MISMATCH, err)
		return err
	}
	var authUser string
	c.caller.Auth = MethodSimple
	c.caller.Protection = ProtectionAuthentication
	switch h.auth {
	case AuthNone:
	case AuthSASL:
		if c.s.cfg.SASL == nil {
			err := errors.New("SASL authentication is not enabled on this server; use simple authentication")
			c.fatalClass(CallIDSASL, ClassAccessControl, hadooppb.RpcResponseHeaderProto_FATAL_UNAUTHORIZED, err)
			return err
		}
		ex := &SASLExchange{conn: c.conn, max: c.s.cfg.MaxPacketSize, server: true}
		if authUser, err = c.s.cfg.SASL.Negotiate(ctx, ex); err != nil {
			c.fatalClass(CallIDSASL, ClassAccessControl, hadooppb.RpcResponseHeaderProto_FATAL_UNAUTHORIZED, err)
			return fmt.Errorf("sasl: %w", err)
		}
		c.caller.Auth = ex.method
		if ex.layer != nil {
			c.caller.Protection = protectionNames(ex.layer.level())
		}
		c.conn = ex.protect(c.conn)
	default:
		err := fmt.Errorf("%w: unknown auth protocol 0x%02x", ErrBadHeader, byte(h.auth))
		c.fatal(-1, hadooppb.RpcResponseHeaderProto_FATAL_UNAUTHORIZED, err)
		return err
	}

	body, err := readPacket(c.conn, c.s.cfg.MaxPacketSize)
	if err != nil {
		return fmt.Errorf("read connection context: %w", err)
	}
	var rh hadooppb.RpcRequestHeaderProto
	if body, err = unmarshalNext(body, &rh); err != nil {
		return err
	}
	if rh.GetCallId() != CallIDConnectionContext {
		err := fmt.Errorf("%w: call id %d before the connection context", ErrMalformedPacket, rh.GetCallId())
		c.fatal(rh.GetCallId(), hadooppb.RpcResponseHeaderProto_FATAL_INVALID_RPC_HEADER, err)
		return err
	}
	var cc hadooppb.IpcConnectionContextProto
	if _, err := unmarshalNext(body, &cc); err != nil {
		return err
	}
	c.caller.ClientID = rh.GetClientId()
	c.caller.Protocol = cc.GetProtocol()
	c.caller.User = cc.GetUserInfo().GetEffectiveUser()
	c.caller.RealUser = cc.GetUserInfo().GetRealUser()
	if c.caller.User == "" && authUser == "" {
		// As Hadoop's ProtoUtil.getUgi reads it: user information with
		// only a real user names that user, who acts for no one.
		c.caller.User, c.caller.RealUser = c.caller.RealUser, ""
	}
	if authUser != "" {
		// The authenticated identity is the real user; the context may ask
		// to act for another (a proxy user), which a server checks.
		c.caller.RealUser = authUser
		// A Kerberos client names itself by its principal (alice@REALM),
		// which is the authenticated user, as Hadoop's auth_to_local maps it.
		if eff := c.caller.User; eff == "" || shortUserName(eff) == authUser {
			c.caller.User = authUser
		}
	}
	if c.caller.User == "" {
		err := errors.New("connection context names no user")
		c.fatalClass(CallIDConnectionContext, ClassAccessControl, hadooppb.RpcResponseHeaderProto_FATAL_UNAUTHORIZED, err)
		return err
	}
	return nil
}

// call is one parsed request.
type call struct {
	id       int32
	retry    int32
	clientID []byte
	close    bool
	protocol string
	method   string
	caller   Caller
	m        method
	req      proto.Message
	err      error // a non-fatal dispatch error to send back
}

func (c *serverConn) parseCall(body []byte) (*call, error) {
	cl := &call{id: -1}
	var rh hadooppb.RpcRequestHeaderProto
	body, err := unmarshalNext(body, &rh)
	if err != nil {
		return cl, err
	}
	cl.id, cl.retry, cl.clientID = rh.GetCallId(), rh.GetRetryCount(), rh.GetClientId()
	if cl.id == CallIDPing {
		return cl, nil
	}
	if rh.GetRpcOp() == hadooppb.RpcRequestHeaderProto_RPC_CLOSE_CONNECTION {
		cl.close = true
		return cl, nil
	}
	if rh.GetRpcKind() != hadooppb.RpcKindProto_RPC_PROTOCOL_BUFFER {
		return cl, fmt.Errorf("%w: rpc kind %v (only protocol buffers are served)", ErrMalformedPacket, rh.GetRpcKind())
	}
	var reqh hadooppb.RequestHeaderProto
	if body, err = unmarshalNext(body, &reqh); err != nil {
		return cl, err
	}
	cl.protocol, cl.method = reqh.GetDeclaringClassProtocolName(), reqh.GetMethodName()
	cl.caller = c.caller
	cl.caller.Method = cl.method
	svc, ok := c.s.services[cl.protocol]
	if !ok {
		cl.err = &RemoteError{Class: ClassNoSuchProtocol, Code: hadooppb.RpcResponseHeaderProto_ERROR_NO_SUCH_PROTOCOL,
			Message: fmt.Sprintf("unknown protocol: %s", cl.protocol)}
		return cl, nil
	}
	m, ok := svc.methods[cl.method]
	if !ok {
		cl.err = &RemoteError{Class: ClassNoSuchMethod, Code: hadooppb.RpcResponseHeaderProto_ERROR_NO_SUCH_METHOD,
			Message: fmt.Sprintf("unknown method %s called on %s protocol", cl.method, cl.protocol)}
		return cl, nil
	}
	cl.m = m
	cl.req = m.newRequest()
	if _, err := unmarshalNext(body, cl.req); err != nil {
		return cl, fmt.Errorf("%s request: %w", cl.method, err)
	}
	return cl, nil
}

func (c *serverConn) respond(cl *call, resp proto.Message, err error) {
	hdr := &hadooppb.RpcResponseHeaderProto{
		CallId:              proto.Uint32(uint32(cl.id)),
		Status:              hadooppb.RpcResponseHeaderProto_SUCCESS.Enum(),
		ServerIpcVersionNum: proto.Uint32(Version),
		ClientId:            cl.clientID,
		RetryCount:          proto.Int32(cl.retry),
	}
	if err != nil {
		re := asRemote(err)
		hdr.Status = hadooppb.RpcResponseHeaderProto_ERROR.Enum()
		if re.Fatal {
			hdr.Status = hadooppb.RpcResponseHeaderProto_FATAL.Enum()
		}
		hdr.ExceptionClassName = proto.String(re.Class)
		hdr.ErrorMsg = proto.String(re.Message)
		hdr.ErrorDetail = re.Code.Enum()
		resp = nil
	}
	pkt, merr := marshalPacket(hdr, resp)
	if merr != nil {
		c.s.log.Error("marshal response", "method", cl.method, "err", merr)
		hdr.Status = hadooppb.RpcResponseHeaderProto_ERROR.Enum()
		hdr.ExceptionClassName = proto.String(ClassIOException)
		hdr.ErrorMsg = proto.String(fmt.Sprintf("serialize %s response: %v", cl.method, merr))
		hdr.ErrorDetail = hadooppb.RpcResponseHeaderProto_ERROR_SERIALIZING_RESPONSE.Enum()
		pkt, _ = marshalPacket(hdr)
	}
	c.write(pkt)
	if err != nil && asRemote(err).Fatal {
		c.conn.Close()
	}
}

func (c *serverConn) fatal(callID int32, code ErrorCode, err error) {
	c.fatalClass(callID, ClassRPCServer, code, err)
}

func (c *serverConn) fatalClass(callID int32, class string, code ErrorCode, err error) {
	hdr := &hadooppb.RpcResponseHeaderProto{
		CallId:              proto.Uint32(wireCallID(callID)),
		Status:              hadooppb.RpcResponseHeaderProto_FATAL.Enum(),
		ServerIpcVersionNum: proto.Uint32(Version),
		ExceptionClassName:  proto.String(class),
		ErrorMsg:            proto.String(err.Error()),
		ErrorDetail:         code.Enum(),
	}
	if pkt, merr := marshalPacket(hdr); merr == nil {
		c.write(pkt)
	}
}

func (c *serverConn) write(pkt []byte) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if _, err := c.conn.Write(pkt); err != nil && !isClosed(err) {
		c.s.log.Debug("write response", "remote", c.conn.RemoteAddr(), "err", err)
	}
}

func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF)
}

// shortUserName is a principal's user: alice for alice@REALM and
// alice/host@REALM.
func shortUserName(principal string) string {
	name, _, _ := strings.Cut(principal, "@")
	name, _, _ = strings.Cut(name, "/")
	return name
}
