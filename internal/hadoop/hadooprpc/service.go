package hadooprpc

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/protobuf/proto"
)

// Service is one RPC protocol served by a Server: a protocol name as clients
// declare it (for example "org.apache.hadoop.hdfs.protocol.ClientProtocol")
// and its methods.
type Service struct {
	protocol string
	methods  map[string]method
}

type method struct {
	newRequest func() proto.Message
	call       func(ctx context.Context, req proto.Message) (proto.Message, error)
}

// NewService returns an empty service for protocol.
func NewService(protocol string) *Service {
	return &Service{protocol: protocol, methods: map[string]method{}}
}

// Protocol returns the protocol name the service answers to.
func (s *Service) Protocol() string { return s.protocol }

// Handle registers fn as the method name of svc. Req and Resp are generated
// protobuf message pointer types. Handle panics when name is registered twice.
func Handle[Req, Resp proto.Message](svc *Service, name string, fn func(ctx context.Context, req Req) (Resp, error)) {
	if _, dup := svc.methods[name]; dup {
		panic(fmt.Sprintf("hadooprpc: method %s.%s registered twice", svc.protocol, name))
	}
	var zero Req
	typ := zero.ProtoReflect().Type()
	svc.methods[name] = method{
		newRequest: func() proto.Message { return typ.New().Interface() },
		call: func(ctx context.Context, req proto.Message) (proto.Message, error) {
			resp, err := fn(ctx, req.(Req))
			if err != nil {
				return nil, err
			}
			return resp, nil
		},
	}
}

// Caller describes the connection a call arrived on.
type Caller struct {
	// User is the effective user the connection acts for.
	User string
	// RealUser is the authenticated user when it differs (proxy users).
	RealUser string
	// Protocol is the protocol named in the connection context.
	Protocol string
	// ClientID is the client's globally unique id.
	ClientID []byte
	// RemoteAddr is the client's address.
	RemoteAddr net.Addr
	// Method is the method being called.
	Method string
	// Auth is how the connection authenticated: MethodSimple,
	// MethodKerberos or MethodToken.
	Auth string
	// Protection is the connection's hadoop.rpc.protection level.
	Protection string
}

type callerKey struct{}

// CallerFromContext returns the caller of the call ctx belongs to.
func CallerFromContext(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// WithCaller returns ctx carrying c. Servers set it for every call; tests of
// handlers use it to call them directly.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}
