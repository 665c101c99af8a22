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
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// metadataKey is the gRPC metadata key that carries the token.
const metadataKey = "spindle-auth"

// tokenPrefix versions the token layout.
const tokenPrefix = "v1"

// MaxSkew is how far a token's timestamp may be from the server's clock.
const MaxSkew = 5 * time.Minute

// MinSecretLen is the shortest secret accepted, in bytes.
const MinSecretLen = 16

// Errors returned by Verify.
var (
	ErrMissingToken = errors.New("auth: missing credentials")
	ErrBadToken     = errors.New("auth: malformed credentials")
	ErrBadSignature = errors.New("auth: credentials do not match the secret")
	ErrExpired      = errors.New("auth: credentials outside the allowed clock skew")
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
}

// NewSigner returns a Signer for secret, which must be at least MinSecretLen bytes.
func NewSigner(secret string) (*Signer, error) {
	if len(secret) < MinSecretLen {
		return nil, ErrWeakSecret
	}
	return &Signer{secret: []byte(secret), now: time.Now}, nil
}

func (s *Signer) mac(method, ts, nonce string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(method))
	m.Write([]byte{0})
	m.Write([]byte(ts))
	m.Write([]byte{0})
	m.Write([]byte(nonce))
	return hex.EncodeToString(m.Sum(nil))
}

// Token returns a token authorising one call of method.
func (s *Signer) Token(method string) (string, error) {
	n := make([]byte, 12)
	if _, err := rand.Read(n); err != nil {
		return "", fmt.Errorf("generate nonce: %w", err)
	}
	ts := strconv.FormatInt(s.now().Unix(), 10)
	nonce := hex.EncodeToString(n)
	return strings.Join([]string{tokenPrefix, ts, nonce, s.mac(method, ts, nonce)}, "."), nil
}

// Verify checks that token authorises a call of method.
func (s *Signer) Verify(method, token string) error {
	if token == "" {
		return ErrMissingToken
	}
	parts := strings.Split(token, ".")
	if len(parts) != 4 || parts[0] != tokenPrefix {
		return ErrBadToken
	}
	ts, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return ErrBadToken
	}
	want := s.mac(method, parts[1], parts[2])
	if !hmac.Equal([]byte(want), []byte(parts[3])) {
		return ErrBadSignature
	}
	if d := s.now().Sub(time.Unix(ts, 0)); d > MaxSkew || d < -MaxSkew {
		return ErrExpired
	}
	return nil
}

// perRPC implements credentials.PerRPCCredentials.
type perRPC struct{ s *Signer }

func (p perRPC) GetRequestMetadata(ctx context.Context, uri ...string) (map[string]string, error) {
	ri, ok := credentials.RequestInfoFromContext(ctx)
	if !ok {
		return nil, errors.New("auth: no request info in context")
	}
	tok, err := p.s.Token(ri.Method)
	if err != nil {
		return nil, err
	}
	return map[string]string{metadataKey: tok}, nil
}

func (perRPC) RequireTransportSecurity() bool { return false }

// DialOption returns a grpc.DialOption that signs every call with s.
func (s *Signer) DialOption() grpc.DialOption {
	return grpc.WithPerRPCCredentials(perRPC{s})
}

func (s *Signer) check(ctx context.Context, method string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	var tok string
	if v := md.Get(metadataKey); len(v) > 0 {
		tok = v[0]
	}
	if err := s.Verify(method, tok); err != nil {
		return status.Error(codes.Unauthenticated, err.Error())
	}
	return nil
}

// ServerOptions returns interceptors that refuse every call, unary or
// streaming, that does not carry a valid token for s.
func (s *Signer) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := s.check(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := s.check(ss.Context(), info.FullMethod); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}
