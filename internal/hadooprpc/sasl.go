package hadooprpc

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/spindle-ml/spindle/internal/hadooppb"
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
