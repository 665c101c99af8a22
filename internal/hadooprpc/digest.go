package hadooprpc

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/spindle-ml/spindle/internal/hadooppb"
	"google.golang.org/protobuf/proto"
)

// Hadoop's names for the SASL methods a server offers.
const (
	// MethodToken authenticates with a delegation, AMRM, NM or container
	// token over DIGEST-MD5.
	MethodToken = "TOKEN"
	// MethodSimple names the user in the connection context, unchecked.
	MethodSimple = "SIMPLE"
	// MechanismDigestMD5 is the SASL mechanism of token authentication.
	MechanismDigestMD5 = "DIGEST-MD5"
	// digestRealm and digestURI are what Hadoop's token SASL uses: no
	// protocol, server id "default".
	digestRealm = "default"
	digestURI   = "/default"
)

// ErrTokenRejected reports a token the server did not accept.
var ErrTokenRejected = errors.New("hadooprpc: token rejected")

// Token is a Hadoop token: an opaque identifier, the password derived from
// it with the issuer's secret key, its kind and the service it is for.
type Token struct {
	Identifier []byte
	Password   []byte
	Kind       string
	Service    string
}

// Proto returns t as Hadoop's TokenProto.
func (t Token) Proto() *hadooppb.TokenProto {
	return &hadooppb.TokenProto{
		Identifier: t.Identifier, Password: t.Password,
		Kind: proto.String(t.Kind), Service: proto.String(t.Service),
	}
}

// TokenFromProto converts Hadoop's TokenProto.
func TokenFromProto(p *hadooppb.TokenProto) Token {
	return Token{Identifier: p.GetIdentifier(), Password: p.GetPassword(), Kind: p.GetKind(), Service: p.GetService()}
}

// String names the token without its secret parts.
func (t Token) String() string { return fmt.Sprintf("%s token for %s", t.Kind, t.Service) }

// TokenAuth is the client side of Hadoop's TOKEN authentication: SASL
// DIGEST-MD5 with the token's identifier as user name and its password as
// the secret, both base64-encoded as Hadoop does.
type TokenAuth struct {
	Token Token
}

var _ ClientSASL = TokenAuth{}

// TokenFunc is TOKEN authentication with the token the function returns
// as each connection opens: connections opened after the token changed
// (fresh delegation tokens in the credentials file) use the new one, and
// connections already open keep the one they authenticated with.
type TokenFunc func() (Token, error)

var _ ClientSASL = TokenFunc(nil)

// Negotiate authenticates with the current token.
func (f TokenFunc) Negotiate(ctx context.Context, ex *SASLExchange) error {
	t, err := f()
	if err != nil {
		return err
	}
	return TokenAuth{Token: t}.Negotiate(ctx, ex)
}

// isToken says whether auth authenticates with a token, which names its
// user: the connection context then claims none.
func isToken(auth ClientSASL) bool {
	switch auth.(type) {
	case TokenAuth, TokenFunc:
		return true
	}
	return false
}

// Negotiate runs the exchange: NEGOTIATE, the server's offer with its first
// challenge, INITIATE with the digest response, SUCCESS with rspauth.
func (a TokenAuth) Negotiate(ctx context.Context, ex *SASLExchange) error {
	offer, err := ex.offer(MethodToken, MechanismDigestMD5, "token authentication")
	if err != nil {
		return err
	}
	uri := offer.GetProtocol() + "/" + offer.GetServerId()
	resp, expect, err := digestResponse(offer.GetChallenge(), a.Token, uri)
	if err != nil {
		return err
	}
	chosen := proto.Clone(offer).(*hadooppb.RpcSaslProto_SaslAuth)
	chosen.Challenge = nil
	if err := ex.Send(&hadooppb.RpcSaslProto{State: hadooppb.RpcSaslProto_INITIATE.Enum(), Token: resp, Auths: []*hadooppb.RpcSaslProto_SaslAuth{chosen}}); err != nil {
		return err
	}
	m, err := ex.Recv()
	if err != nil {
		return err
	}
	if m.GetState() != hadooppb.RpcSaslProto_SUCCESS {
		return fmt.Errorf("server answered %v to the digest response", m.GetState())
	}
	if got := strings.TrimPrefix(string(m.GetToken()), "rspauth="); subtle.ConstantTimeCompare([]byte(got), []byte(expect)) != 1 {
		return errors.New("server's rspauth does not prove it knows the token secret")
	}
	return nil
}

// digestResponse answers a DIGEST-MD5 challenge (RFC 2831, qop auth) with
// tok, and returns the rspauth the server must send back.
func digestResponse(challenge []byte, tok Token, uri string) (resp []byte, rspauth string, err error) {
	ch, err := parseDigest(string(challenge))
	if err != nil {
		return nil, "", fmt.Errorf("parse digest challenge: %w", err)
	}
	nonce := ch["nonce"]
	if nonce == "" {
		return nil, "", errors.New("digest challenge has no nonce")
	}
	if q := ch["qop"]; q != "" && !containsToken(q, "auth") {
		return nil, "", fmt.Errorf("%w: the server requires qop %q of token connections (hadoop.rpc.protection integrity or privacy), and Spindle's token authentication does authentication only", ErrProtection, q)
	}
	realm := ch["realm"]
	cb := make([]byte, 12)
	rand.Read(cb)
	cnonce := base64.StdEncoding.EncodeToString(cb)
	d := digest{
		user: tokenUser(tok.Identifier), realm: realm, password: base64.StdEncoding.EncodeToString(tok.Password),
		nonce: nonce, cnonce: cnonce, nc: "00000001", qop: "auth", uri: uri,
	}
	var b strings.Builder
	b.WriteString(`charset=utf-8,username="` + d.user + `"`)
	if realm != "" {
		b.WriteString(`,realm="` + realm + `"`)
	}
	b.WriteString(`,nonce="` + nonce + `",nc=` + d.nc + `,cnonce="` + cnonce + `",digest-uri="` + uri + `",maxbuf=65536`)
	b.WriteString(",response=" + d.response("AUTHENTICATE") + ",qop=auth")
	return []byte(b.String()), d.response(""), nil
}

// tokenUser is the SASL user name of a token: its identifier in base64.
func tokenUser(id []byte) string { return base64.StdEncoding.EncodeToString(id) }

// digest holds the values of one DIGEST-MD5 exchange.
type digest struct {
	user, realm, password, nonce, cnonce, nc, qop, uri string
}

// response is the response value for method AUTHENTICATE (the client's
// proof) or "" (the server's rspauth), with algorithm md5-sess.
func (d digest) response(method string) string {
	inner := md5.Sum([]byte(d.user + ":" + d.realm + ":" + d.password))
	a1 := append(inner[:], []byte(":"+d.nonce+":"+d.cnonce)...)
	ha1 := md5.Sum(a1)
	ha2 := md5.Sum([]byte(method + ":" + d.uri))
	kd := md5.Sum([]byte(hex.EncodeToString(ha1[:]) + ":" + d.nonce + ":" + d.nc + ":" + d.cnonce + ":" + d.qop + ":" + hex.EncodeToString(ha2[:])))
	return hex.EncodeToString(kd[:])
}

// parseDigest parses a comma-separated list of key=value and key="value"
// directives.
func parseDigest(s string) (map[string]string, error) {
	out := map[string]string{}
	for s = strings.TrimSpace(s); s != ""; {
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return nil, fmt.Errorf("directive without a value in %q", s)
		}
		key := strings.ToLower(strings.TrimSpace(s[:eq]))
		s = strings.TrimLeft(s[eq+1:], " \t")
		var val string
		if strings.HasPrefix(s, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated quoted value of %s", key)
			}
			val, s = b.String(), s[i+1:]
		} else {
			end := strings.IndexByte(s, ',')
			if end < 0 {
				end = len(s)
			}
			val, s = strings.TrimSpace(s[:end]), s[end:]
		}
		if _, dup := out[key]; !dup || key != "realm" {
			out[key] = val
		}
		s = strings.TrimLeft(s, " \t,")
	}
	return out, nil
}

func containsToken(list, tok string) bool {
	for _, t := range strings.Split(list, ",") {
		if strings.TrimSpace(t) == tok {
			return true
		}
	}
	return false
}

// TokenLookup finds the password of a token identifier and the user the
// token authenticates; an error refuses the token (unknown, expired).
type TokenLookup func(identifier []byte) (password []byte, user string, err error)

// TokenServer is the server side of TOKEN authentication (SASL DIGEST-MD5),
// optionally also accepting SIMPLE, as Hadoop servers with a secret
// manager do.
type TokenServer struct {
	// Lookup checks token identifiers.
	Lookup TokenLookup
	// AllowSimple lets clients without a token name their user (Hadoop's
	// insecure mode on the ResourceManager's client port).
	AllowSimple bool
}

var _ SASL = TokenServer{}

// Negotiate runs the server side of the exchange. A client that chose
// SIMPLE gets an empty user: the connection context names it.
func (s TokenServer) Negotiate(ctx context.Context, ex *SASLExchange) (string, error) {
	return negotiateServer(ctx, ex, s)
}

func (s TokenServer) offers(ex *SASLExchange) ([]*hadooppb.RpcSaslProto_SaslAuth, error) {
	nb := make([]byte, 24)
	rand.Read(nb)
	ex.nonce = base64.StdEncoding.EncodeToString(nb)
	challenge := fmt.Sprintf(`realm="%s",nonce="%s",qop="auth",charset=utf-8,algorithm=md5-sess`, digestRealm, ex.nonce)
	auths := []*hadooppb.RpcSaslProto_SaslAuth{{
		Method: proto.String(MethodToken), Mechanism: proto.String(MechanismDigestMD5),
		Protocol: proto.String(""), ServerId: proto.String(digestRealm), Challenge: []byte(challenge),
	}}
	if s.AllowSimple {
		auths = append(auths, &hadooppb.RpcSaslProto_SaslAuth{Method: proto.String(MethodSimple), Mechanism: proto.String("")})
	}
	return auths, nil
}

func (s TokenServer) accept(ctx context.Context, ex *SASLExchange, m *hadooppb.RpcSaslProto) (string, error) {
	if m.GetAuths()[0].GetMethod() == MethodSimple {
		return "", nil
	}
	nonce := ex.nonce
	resp, err := parseDigest(string(m.GetToken()))
	if err != nil {
		return "", fmt.Errorf("parse digest response: %w", err)
	}
	if resp["nonce"] != nonce {
		return "", errors.New("digest response answers another nonce")
	}
	if resp["digest-uri"] != digestURI {
		return "", fmt.Errorf("digest response is for %q, want %q", resp["digest-uri"], digestURI)
	}
	if q := resp["qop"]; q != "" && q != "auth" {
		return "", fmt.Errorf("digest response asks qop %q; only auth is served", q)
	}
	id, err := base64.StdEncoding.DecodeString(resp["username"])
	if err != nil {
		return "", fmt.Errorf("digest user name is not a base64 token identifier: %w", err)
	}
	pw, user, err := s.Lookup(id)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrTokenRejected, err)
	}
	d := digest{
		user: resp["username"], realm: resp["realm"], password: base64.StdEncoding.EncodeToString(pw),
		nonce: nonce, cnonce: resp["cnonce"], nc: resp["nc"], qop: "auth", uri: resp["digest-uri"],
	}
	if subtle.ConstantTimeCompare([]byte(d.response("AUTHENTICATE")), []byte(resp["response"])) != 1 {
		return "", fmt.Errorf("%w: digest response does not match the password of the token for %s", ErrTokenRejected, user)
	}
	if err := ex.Send(&hadooppb.RpcSaslProto{State: hadooppb.RpcSaslProto_SUCCESS.Enum(), Token: []byte("rspauth=" + d.response(""))}); err != nil {
		return "", err
	}
	return user, nil
}
