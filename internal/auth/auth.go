package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// metadataKey is the gRPC metadata key that carries the token.
const metadataKey = "spindle-auth"

// tokenPrefix versions the token layout: v2 covers the request, v3 also
// the audience (the server it is meant for), v4 also a server stream's
// request.
const tokenPrefix = "v4"

// MaxSkew is how far a token's timestamp may be from the server's clock.
// Nonces are remembered for twice as long, so a token is good once.
const MaxSkew = 2 * time.Minute

// StartGrace is how much older than its server's start a token may be:
// tokens are stamped in whole seconds, and a client's clock may lag the
// server's by a little. Older tokens, made for a server before it
// restarted (whose nonces it has forgotten), are refused.
const StartGrace = 2 * time.Second

// MinSecretLen is the shortest secret accepted, in bytes.
const MinSecretLen = 16

// Errors returned by Verify.
var (
	ErrMissingToken = errors.New("auth: missing credentials")
	ErrBadToken     = errors.New("auth: malformed credentials")
	ErrBadSignature = errors.New("auth: credentials do not match the secret")
	ErrExpired      = errors.New("auth: credentials outside the allowed clock skew")
	ErrReplayed     = errors.New("auth: credentials already used")
	ErrBeforeStart  = errors.New("auth: credentials made before this server started")
	ErrWeakSecret   = fmt.Errorf("auth: secret shorter than %d bytes", MinSecretLen)
)

// NewSecret returns a fresh random secret, hex encoded.
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Signer makes and checks tokens for one secret.
type Signer struct {
	secret []byte
	now    func() time.Time
	seen   *nonces
	// audience names the server tokens are for (For); empty for none.
	audience string
	// accept, when set, are the audiences Verify takes instead of
	// audience alone (ForAny): one server known by several names.
	accept []string
	// start is when the Signer was made: a server refuses tokens made
	// before it (StartGrace).
	start time.Time
}

// NewSigner returns a Signer for secret, which must be at least MinSecretLen bytes.
func NewSigner(secret string) (*Signer, error) {
	if len(secret) < MinSecretLen {
		return nil, ErrWeakSecret
	}
	return &Signer{secret: []byte(secret), now: time.Now, seen: &nonces{}, start: time.Now()}, nil
}

// For returns a Signer of the same secret (and the same memory of used
// nonces) whose tokens are bound to audience, a name of the one server
// they are for: a server verifies with For(its own name), so a token made
// for one server of a secret is refused by another that shares it.
func (s *Signer) For(audience string) *Signer {
	c := *s
	c.audience = audience
	return &c
}

// ForAny returns a Signer of the same secret and nonces that verifies
// tokens made for any of audiences: the names of one server that clients
// reach under several (a master by its host name, address or loopback).
// Its own tokens are made for the first.
func (s *Signer) ForAny(audiences ...string) *Signer {
	c := s.For(audiences[0])
	c.accept = append([]string(nil), audiences...)
	return c
}

func (s *Signer) mac(method, ts, nonce string, digest []byte) string {
	return s.macFor(s.audience, method, ts, nonce, digest)
}

// signedFor reports whether sig is the MAC of the call for the Signer's
// audience, or for one of the audiences it accepts.
func (s *Signer) signedFor(sig, method, ts, nonce string, digest []byte) bool {
	if len(s.accept) == 0 {
		return hmac.Equal([]byte(s.mac(method, ts, nonce, digest)), []byte(sig))
	}
	for _, a := range s.accept {
		if hmac.Equal([]byte(s.macFor(a, method, ts, nonce, digest)), []byte(sig)) {
			return true
		}
	}
	return false
}

func (s *Signer) macFor(audience, method, ts, nonce string, digest []byte) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(audience))
	m.Write([]byte{0})
	m.Write([]byte(method))
	m.Write([]byte{0})
	m.Write([]byte(ts))
	m.Write([]byte{0})
	m.Write([]byte(nonce))
	m.Write([]byte{0})
	m.Write(digest)
	return hex.EncodeToString(m.Sum(nil))
}

// Digest is what a token covers of a request: the SHA-256 of its
// deterministic protobuf encoding. Both ends encode with the same
// definitions, so they agree byte for byte.
func Digest(req any) ([]byte, error) {
	if req == nil {
		return nil, nil
	}
	m, ok := req.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("auth: request %T is not a protobuf message", req)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("auth: encode request: %w", err)
	}
	sum := sha256.Sum256(b)
	return sum[:], nil
}

// Token returns a token authorising one call of method with the request
// whose Digest is digest (nil for a stream of many requests), at the
// Signer's audience.
// Every token covers its time and a fresh nonce, so a stream's token too
// is good for the one stream it opens.
func (s *Signer) Token(method string, digest []byte) (string, error) {
	n := make([]byte, 16)
	if _, err := rand.Read(n); err != nil {
		return "", fmt.Errorf("generate nonce: %w", err)
	}
	ts := strconv.FormatInt(s.now().Unix(), 10)
	nonce := hex.EncodeToString(n)
	return strings.Join([]string{tokenPrefix, ts, nonce, s.mac(method, ts, nonce, digest)}, "."), nil
}

// Verify checks that token authorises a call of method with the request
// whose Digest is digest, and that it was not used before.
func (s *Signer) Verify(method string, digest []byte, token string) error {
	t, err := s.parse(token)
	if err != nil {
		return err
	}
	if !s.signedFor(t.sig, method, t.ts, t.nonce, digest) {
		return ErrBadSignature
	}
	if !s.seen.add(t.nonce, s.now()) {
		return ErrReplayed
	}
	return nil
}

// tokenParts are a token's parts.
type tokenParts struct{ ts, nonce, sig string }

// parse checks what can be checked of token without the request it is
// for: its layout, that its time is within MaxSkew of the server's clock
// and not before the server started.
func (s *Signer) parse(tok string) (tokenParts, error) {
	if tok == "" {
		return tokenParts{}, ErrMissingToken
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 4 || parts[0] != tokenPrefix || len(parts[2]) != 32 {
		return tokenParts{}, ErrBadToken
	}
	ts, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return tokenParts{}, ErrBadToken
	}
	if d := s.now().Sub(time.Unix(ts, 0)); d > MaxSkew || d < -MaxSkew {
		return tokenParts{}, ErrExpired
	}
	if time.Unix(ts, 0).Before(s.start.Add(-StartGrace)) {
		return tokenParts{}, ErrBeforeStart
	}
	return tokenParts{ts: parts[1], nonce: parts[2], sig: parts[3]}, nil
}

// nonces remembers the nonces of accepted tokens for at least 2*MaxSkew,
// longer than any token stays within the skew, in two generations: a
// nonce is known if either holds it, and the older is dropped when the
// newer is 2*MaxSkew old.
type nonces struct {
	mu       sync.Mutex
	cur, old map[string]struct{}
	since    time.Time // when cur was started
}

// add records nonce and reports whether it is new.
func (n *nonces) add(nonce string, now time.Time) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cur == nil || now.Sub(n.since) > 2*MaxSkew {
		n.old, n.cur, n.since = n.cur, map[string]struct{}{}, now
	}
	if _, ok := n.cur[nonce]; ok {
		return false
	}
	if _, ok := n.old[nonce]; ok {
		return false
	}
	n.cur[nonce] = struct{}{}
	return true
}

// DialOptions return the client interceptors that sign every call with s,
// over its request: unary calls and server streams (stream.go).
func (s *Signer) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			digest, err := Digest(req)
			if err != nil {
				return err
			}
			tok, err := s.Token(method, digest)
			if err != nil {
				return err
			}
			return invoke(metadata.AppendToOutgoingContext(ctx, metadataKey, tok), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(s.streamClientInterceptor),
	}
}

func (s *Signer) check(ctx context.Context, method string, digest []byte) error {
	if err := s.Verify(method, digest, incomingToken(ctx)); err != nil {
		return refused(err)
	}
	return nil
}

// incomingToken is the token a call to this server carries, "" for none.
func incomingToken(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(metadataKey); len(v) > 0 {
		return v[0]
	}
	return ""
}

// refused is the status of a call whose token Verify refused.
func refused(err error) error { return status.Error(codes.Unauthenticated, err.Error()) }

// ServerOptions returns interceptors that refuse every call, unary or
// streaming, that does not carry a valid, unused token for s over its
// request (unary calls and server streams, stream.go).
func (s *Signer) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			digest, err := Digest(req)
			if err != nil {
				return nil, status.Error(codes.Internal, err.Error())
			}
			if err := s.check(ctx, info.FullMethod, digest); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(s.streamServerInterceptor),
	}
}

// DeriveToken returns a fixed token derived from secret for one purpose
// (an HMAC-SHA256 of the purpose under the secret), for clients that cannot
// sign every call as Signer does, such as an Arrow Flight producer
// pushing into a job. It does not reveal the secret, and a token for one
// purpose is useless for another; whoever holds it can do what its purpose
// allows, so it is handed out like a password.
func DeriveToken(secret, purpose string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("spindle-derived-token\x00"))
	m.Write([]byte(purpose))
	return hex.EncodeToString(m.Sum(nil))
}
