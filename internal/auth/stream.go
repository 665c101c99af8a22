package auth

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// How a stream's token covers its request. A server-streaming call (one
// request, a stream of replies: FetchFile, WatchApp) has a single request
// like a unary call, and its token covers it too, or a token seen on the
// wire would open the stream for another request (another file, another
// application). gRPC sends a stream's headers, which carry the token,
// before its request, so the client opens the stream only when its
// request is sent, and the server checks the token against the request
// as the handler receives it, before the handler acts on it. Streams with
// many requests (none on Spindle's control planes) are signed over their
// method alone: the token still opens that one stream once.

// errStreamNotOpen is returned by a signed stream used before its
// request was sent.
var errStreamNotOpen = errors.New("auth: stream used before its request was sent")

// oneRequest says whether a stream carries a single request.
func oneRequest(desc *grpc.StreamDesc) bool { return desc.ServerStreams && !desc.ClientStreams }

// streamClientInterceptor signs every stream with s: a server stream over
// its request, when it is sent, any other over its method.
func (s *Signer) streamClientInterceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if oneRequest(desc) {
		return &signOnSend{ctx: ctx, open: func(digest []byte) (grpc.ClientStream, error) {
			tok, err := s.Token(method, digest)
			if err != nil {
				return nil, err
			}
			return streamer(metadata.AppendToOutgoingContext(ctx, metadataKey, tok), desc, cc, method, opts...)
		}}, nil
	}
	tok, err := s.Token(method, nil)
	if err != nil {
		return nil, err
	}
	return streamer(metadata.AppendToOutgoingContext(ctx, metadataKey, tok), desc, cc, method, opts...)
}

// signOnSend is a server stream that is opened, with a token over its
// request, when the request is sent.
type signOnSend struct {
	ctx  context.Context
	open func(digest []byte) (grpc.ClientStream, error)
	cs   grpc.ClientStream
}

func (c *signOnSend) SendMsg(m any) error {
	if c.cs == nil {
		digest, err := Digest(m)
		if err != nil {
			return err
		}
		cs, err := c.open(digest)
		if err != nil {
			return err
		}
		c.cs = cs
	}
	return c.cs.SendMsg(m)
}

func (c *signOnSend) RecvMsg(m any) error {
	if c.cs == nil {
		return errStreamNotOpen
	}
	return c.cs.RecvMsg(m)
}

func (c *signOnSend) Header() (metadata.MD, error) {
	if c.cs == nil {
		return nil, errStreamNotOpen
	}
	return c.cs.Header()
}

func (c *signOnSend) Trailer() metadata.MD {
	if c.cs == nil {
		return nil
	}
	return c.cs.Trailer()
}

func (c *signOnSend) CloseSend() error {
	if c.cs == nil {
		return errStreamNotOpen
	}
	return c.cs.CloseSend()
}

func (c *signOnSend) Context() context.Context {
	if c.cs == nil {
		return c.ctx
	}
	return c.cs.Context()
}

// streamServerInterceptor refuses every stream without a valid, unused
// token of s: a server stream's is checked over its request as the
// handler receives it (a stream without a token, or with one malformed,
// expired or older than the server, is refused before anything is
// read), any other's over its method.
func (s *Signer) streamServerInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if !info.IsServerStream || info.IsClientStream {
		if err := s.check(ss.Context(), info.FullMethod, nil); err != nil {
			return err
		}
		return h(srv, ss)
	}
	tok := incomingToken(ss.Context())
	if _, err := s.parse(tok); err != nil {
		return refused(err)
	}
	v := &verifyOnRecv{ServerStream: ss, s: s, method: info.FullMethod, token: tok}
	err := h(srv, v)
	if !v.checked() {
		// A handler that never received its request did nothing with it;
		// the caller is still told it was not authenticated.
		return refused(ErrMissingToken)
	}
	return err
}

// verifyOnRecv checks a server stream's token over its request when the
// handler receives it, and fails the receive if it does not match.
type verifyOnRecv struct {
	grpc.ServerStream
	s      *Signer
	method string
	token  string
	// done is set once the request was received and checked (err: the
	// refusal). Only the handler's goroutine receives.
	done bool
	err  error
}

func (v *verifyOnRecv) checked() bool { return v.done }

func (v *verifyOnRecv) RecvMsg(m any) error {
	if v.done {
		if v.err != nil {
			return v.err
		}
		return v.ServerStream.RecvMsg(m)
	}
	if err := v.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	v.done = true
	digest, err := Digest(m)
	if err == nil {
		err = v.s.Verify(v.method, digest, v.token)
	}
	if err != nil {
		v.err = refused(err)
	}
	return v.err
}
