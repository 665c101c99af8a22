package hadooprpc

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"google.golang.org/protobuf/proto"
)

// SASL authenticates the server side of connections that open with
// AuthSASL (Kerberos, delegation tokens). Negotiate runs the whole exchange
// and returns the authenticated user.
type SASL interface {
	Negotiate(ctx context.Context, ex *SASLExchange) (user string, err error)
}

// ClientSASL authenticates the client side of a connection that asked for
// SASL.
type ClientSASL interface {
	Negotiate(ctx context.Context, ex *SASLExchange) error
}

// SASLExchange sends and receives the RpcSaslProto messages of one
// connection's SASL negotiation (call id -33).
type SASLExchange struct {
	conn     net.Conn
	max      int
	clientID []byte
	server   bool
	dialed   string // the address the client dialed, as configured

	method  string        // the SASL method the exchange settled on
	layer   securityLayer // the security layer negotiated, nil for none
	maxSend int           // the largest message the other end takes wrapped
	nonce   string        // a DIGEST-MD5 challenge's nonce, between offer and answer
}

// protect returns conn carrying the stream inside the security layer the
// exchange negotiated, or conn itself when none was.
func (x *SASLExchange) protect(conn net.Conn) net.Conn {
	if x.layer == nil {
		return conn
	}
	return &wrapConn{Conn: conn, layer: x.layer, server: x.server, clientID: x.clientID, max: x.max, maxSend: sendSize(x.maxSend)}
}

// serverMechanism is one SASL method a server offers; negotiateServer
// runs the exchange for several.
type serverMechanism interface {
	// offers returns what the server's NEGOTIATE answer lists for it.
	offers(ex *SASLExchange) ([]*hadooppb.RpcSaslProto_SaslAuth, error)
	// accept runs the rest of the exchange after the client's INITIATE
	// chose one of the offers, and returns the authenticated user ("" for
	// SIMPLE, whose connection context names it).
	accept(ctx context.Context, ex *SASLExchange, initiate *hadooppb.RpcSaslProto) (string, error)
}

// negotiateServer answers the client's NEGOTIATE with every mechanism's
// offers and lets the one the client chooses finish the exchange.
func negotiateServer(ctx context.Context, ex *SASLExchange, mechs ...serverMechanism) (string, error) {
	m, err := ex.Recv()
	if err != nil {
		return "", err
	}
	if m.GetState() != hadooppb.RpcSaslProto_NEGOTIATE {
		return "", fmt.Errorf("client opened with %v, want NEGOTIATE", m.GetState())
	}
	var auths []*hadooppb.RpcSaslProto_SaslAuth
	owner := map[string]serverMechanism{}
	for _, mech := range mechs {
		offers, err := mech.offers(ex)
		if err != nil {
			return "", err
		}
		for _, o := range offers {
			auths = append(auths, o)
			owner[o.GetMethod()] = mech
		}
	}
	if err := ex.Send(&hadooppb.RpcSaslProto{State: hadooppb.RpcSaslProto_NEGOTIATE.Enum(), Auths: auths}); err != nil {
		return "", err
	}
	if m, err = ex.Recv(); err != nil {
		return "", err
	}
	if m.GetState() != hadooppb.RpcSaslProto_INITIATE || len(m.GetAuths()) != 1 {
		return "", fmt.Errorf("client answered %v with %d auths, want INITIATE with one", m.GetState(), len(m.GetAuths()))
	}
	method := m.GetAuths()[0].GetMethod()
	mech, ok := owner[method]
	if !ok {
		return "", fmt.Errorf("client chose %s authentication, which this server does not offer", method)
	}
	ex.method = method
	return mech.accept(ctx, ex, m)
}

// ServerMechanisms offers several SASL methods on one server, as a Hadoop
// server with Kerberos and a delegation-token secret manager does
// (KERBEROS and TOKEN): the client picks. Its elements are
// KerberosServer and TokenServer values.
type ServerMechanisms []SASL

var _ SASL = ServerMechanisms{}

// Negotiate runs the exchange with the mechanism the client chooses.
func (ms ServerMechanisms) Negotiate(ctx context.Context, ex *SASLExchange) (string, error) {
	mechs := make([]serverMechanism, 0, len(ms))
	for _, m := range ms {
		sm, ok := m.(serverMechanism)
		if !ok {
			return "", fmt.Errorf("hadooprpc: %T cannot be combined with other SASL mechanisms", m)
		}
		mechs = append(mechs, sm)
	}
	return negotiateServer(ctx, ex, mechs...)
}

// RemoteAddr returns the address of the other end.
func (x *SASLExchange) RemoteAddr() net.Addr { return x.conn.RemoteAddr() }

// ServerHost is the host the client dialed, as its configuration names it
// (what Hadoop substitutes for _HOST in a server principal), or the
// remote IP address when that is not known.
func (x *SASLExchange) ServerHost() string {
	if h, _, err := net.SplitHostPort(x.dialed); err == nil && h != "" {
		return h
	}
	h, _, _ := net.SplitHostPort(x.conn.RemoteAddr().String())
	return h
}

// Send writes one SASL message.
func (x *SASLExchange) Send(msg *hadooppb.RpcSaslProto) error {
	var hdr proto.Message
	if x.server {
		hdr = &hadooppb.RpcResponseHeaderProto{
			CallId:              proto.Uint32(wireCallID(CallIDSASL)),
			Status:              hadooppb.RpcResponseHeaderProto_SUCCESS.Enum(),
			ServerIpcVersionNum: proto.Uint32(Version),
		}
	} else {
		hdr = requestHeader(CallIDSASL, x.clientID)
	}
	pkt, err := marshalPacket(hdr, msg)
	if err != nil {
		return fmt.Errorf("marshal sasl message: %w", err)
	}
	_, err = x.conn.Write(pkt)
	return err
}

// Recv reads one SASL message. A server-side exchange fails on anything but
// call id -33; a client-side one turns an error response into *RemoteError.
func (x *SASLExchange) Recv() (*hadooppb.RpcSaslProto, error) {
	body, err := readPacket(x.conn, x.max)
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read sasl message: %w", err)
	}
	if x.server {
		var hdr hadooppb.RpcRequestHeaderProto
		if body, err = unmarshalNext(body, &hdr); err != nil {
			return nil, err
		}
		if hdr.GetCallId() != CallIDSASL {
			return nil, fmt.Errorf("%w: call id %d during sasl negotiation", ErrMalformedPacket, hdr.GetCallId())
		}
	} else {
		var hdr hadooppb.RpcResponseHeaderProto
		if body, err = unmarshalNext(body, &hdr); err != nil {
			return nil, err
		}
		if hdr.GetStatus() != hadooppb.RpcResponseHeaderProto_SUCCESS {
			return nil, &RemoteError{Class: hdr.GetExceptionClassName(), Message: hdr.GetErrorMsg(), Code: hdr.GetErrorDetail(), Fatal: true}
		}
	}
	msg := &hadooppb.RpcSaslProto{}
	if _, err := unmarshalNext(body, msg); err != nil {
		return nil, err
	}
	return msg, nil
}

// offer opens a client's negotiation: it sends NEGOTIATE and returns the
// server's offer of method with mechanism, or an error listing what the
// server offers instead.
func (x *SASLExchange) offer(method, mechanism, what string) (*hadooppb.RpcSaslProto_SaslAuth, error) {
	if err := x.Send(&hadooppb.RpcSaslProto{State: hadooppb.RpcSaslProto_NEGOTIATE.Enum()}); err != nil {
		return nil, err
	}
	m, err := x.Recv()
	if err != nil {
		return nil, err
	}
	if m.GetState() != hadooppb.RpcSaslProto_NEGOTIATE {
		return nil, fmt.Errorf("server answered %v to NEGOTIATE", m.GetState())
	}
	var offered []string
	for _, au := range m.GetAuths() {
		offered = append(offered, au.GetMethod()+"/"+au.GetMechanism())
		if au.GetMethod() == method && au.GetMechanism() == mechanism {
			return au, nil
		}
	}
	return nil, fmt.Errorf("server does not offer %s (offers %s)", what, strings.Join(offered, ", "))
}
