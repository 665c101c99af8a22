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
	"strconv"
	"strings"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
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
// the secret, both base64-encoded as Hadoop does, at the quality of
// protection hadoop.rpc.protection asks for: with integrity every later
// message carries an HMAC-MD5, with privacy it is also encrypted (RFC 2831
// auth-int and auth-conf).
type TokenAuth struct {
	Token Token
	// Protection is hadoop.rpc.protection: the levels this client accepts,
	// in order of preference; empty means authentication.
	Protection string
}

var _ ClientSASL = TokenAuth{}

// TokenSource is TOKEN authentication with the token Current returns as
// each connection opens: connections opened after the token changed
// (fresh delegation tokens in the credentials file) use the new one, and
// connections already open keep the one they authenticated with.
type TokenSource struct {
	Current func() (Token, error)
	// Protection is hadoop.rpc.protection, as for TokenAuth.
	Protection string
}

var _ ClientSASL = TokenSource{}

// Negotiate authenticates with the current token.
func (s TokenSource) Negotiate(ctx context.Context, ex *SASLExchange) error {
	t, err := s.Current()
	if err != nil {
		return err
	}
	return TokenAuth{Token: t, Protection: s.Protection}.Negotiate(ctx, ex)
}

// isToken says whether auth authenticates with a token, which names its
// user: the connection context then claims none.
func isToken(auth ClientSASL) bool {
	switch auth.(type) {
	case TokenAuth, TokenSource:
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
	dc, err := newDigestClient(offer.GetChallenge(), a.Token, uri, a.Protection, "the server at "+ex.ServerHost(), settingRPC)
	if err != nil {
		return err
	}
	chosen := proto.Clone(offer).(*hadooppb.RpcSaslProto_SaslAuth)
	chosen.Challenge = nil
	if err := ex.Send(&hadooppb.RpcSaslProto{State: hadooppb.RpcSaslProto_INITIATE.Enum(), Token: dc.response, Auths: []*hadooppb.RpcSaslProto_SaslAuth{chosen}}); err != nil {
		return err
	}
	m, err := ex.Recv()
	if err != nil {
		return err
	}
	if m.GetState() != hadooppb.RpcSaslProto_SUCCESS {
		return fmt.Errorf("server answered %v to the digest response", m.GetState())
	}
	layer, err := dc.finish(m.GetToken())
	if err != nil {
		return err
	}
	if layer != nil {
		ex.layer, ex.maxSend = layer, dc.serverMaxBuf
	}
	return nil
}

// digestClient is the client's half of one DIGEST-MD5 exchange between its
// response and the server's rspauth.
type digestClient struct {
	d            digest
	level        byte   // the protection chosen
	cipher       string // at privacy
	serverMaxBuf int    // the largest wrapped message the server takes
	response     []byte // the digest response to send
}

// The settings that choose a level of protection, and the site files they
// are in.
const (
	settingRPC          = "hadoop.rpc.protection"
	settingDataTransfer = "dfs.data.transfer.protection"
)

// newDigestClient answers a DIGEST-MD5 challenge (RFC 2831) with tok, at
// the first level of protection the server offers too; server names the
// server in errors, setting the configuration key protection came from.
func newDigestClient(challenge []byte, tok Token, uri, protection, server, setting string) (*digestClient, error) {
	want, err := ParseProtection(protection)
	if err != nil {
		return nil, err
	}
	ch, err := parseDigest(string(challenge))
	if err != nil {
		return nil, fmt.Errorf("parse digest challenge: %w", err)
	}
	nonce := ch["nonce"]
	if nonce == "" {
		return nil, errors.New("digest challenge has no nonce")
	}
	offered := byte(qopAuthentication)
	if q, ok := ch["qop"]; ok {
		offered = 0
		for _, name := range strings.Split(q, ",") {
			offered |= digestLevel(name)
		}
	}
	dc := &digestClient{serverMaxBuf: maxWrapBuffer}
	for _, l := range want {
		if offered&l != 0 {
			dc.level = l
			break
		}
	}
	if dc.level == 0 {
		site, of := "core-site.xml", " of token connections"
		if setting == settingDataTransfer {
			site, of = "hdfs-site.xml", ""
		}
		return nil, fmt.Errorf("%w: %s requires %s %s%s, and this client is configured for %s: set %s in %s to what the cluster uses",
			ErrProtection, server, setting, protectionNames(offered), of, protectionNames(maskOf(want)), setting, site)
	}
	if dc.level == qopPrivacy {
		if dc.cipher = chooseCipher(ch["cipher"]); dc.cipher == "" {
			return nil, fmt.Errorf("%w: %s offers the ciphers %q for privacy, none of which this client speaks (%s)", ErrProtection, server, ch["cipher"], strings.Join(digestCiphers, ", "))
		}
	}
	if mb, ok := ch["maxbuf"]; ok {
		if dc.serverMaxBuf, err = parseMaxBuf(mb); err != nil {
			return nil, fmt.Errorf("digest challenge: %w", err)
		}
	}
	realm := ch["realm"]
	cb := make([]byte, 12)
	rand.Read(cb)
	cnonce := base64.StdEncoding.EncodeToString(cb)
	dc.d = digest{
		user: tokenUser(tok.Identifier), realm: realm, password: base64.StdEncoding.EncodeToString(tok.Password),
		nonce: nonce, cnonce: cnonce, nc: "00000001", qop: digestQop(dc.level), uri: uri,
	}
	var b strings.Builder
	b.WriteString(`charset=utf-8,username="` + dc.d.user + `"`)
	if realm != "" {
		b.WriteString(`,realm="` + realm + `"`)
	}
	fmt.Fprintf(&b, `,nonce="%s",nc=%s,cnonce="%s",digest-uri="%s",maxbuf=%d`, nonce, dc.d.nc, cnonce, uri, maxWrapBuffer)
	b.WriteString(",response=" + dc.d.response("AUTHENTICATE") + ",qop=" + dc.d.qop)
	if dc.cipher != "" {
		b.WriteString(`,cipher="` + dc.cipher + `"`)
	}
	dc.response = []byte(b.String())
	return dc, nil
}

// finish checks the server's rspauth and returns the security layer the
// exchange negotiated, nil at authentication.
func (dc *digestClient) finish(rspauth []byte) (securityLayer, error) {
	got := strings.TrimPrefix(string(rspauth), "rspauth=")
	if subtle.ConstantTimeCompare([]byte(got), []byte(dc.d.response(""))) != 1 {
		return nil, errors.New("server's rspauth does not prove it knows the token secret")
	}
	if dc.level == qopAuthentication {
		return nil, nil
	}
	return newDigestLayer(dc.d.ha1(), dc.level, dc.cipher, true)
}

// minMaxBuf is the smallest maxbuf taken: room for a message and what
// the security layer adds.
const minMaxBuf = 64

// parseMaxBuf parses a maxbuf directive: the largest wrapped message the
// sender takes.
func parseMaxBuf(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < minMaxBuf || n > 1<<24-1 {
		return 0, fmt.Errorf("maxbuf %q is not a size between %d and %d", s, minMaxBuf, 1<<24-1)
	}
	return n, nil
}

// tokenUser is the SASL user name of a token: its identifier in base64.
func tokenUser(id []byte) string { return base64.StdEncoding.EncodeToString(id) }

// digest holds the values of one DIGEST-MD5 exchange.
type digest struct {
	user, realm, password, nonce, cnonce, nc, qop, uri string
	authzid                                            string // optional
}

// ha1 is H(A1) with algorithm md5-sess: the secret the response values and
// the security layer's keys come from.
func (d digest) ha1() [md5.Size]byte {
	inner := md5.Sum([]byte(d.user + ":" + d.realm + ":" + d.password))
	a1 := append(inner[:], []byte(":"+d.nonce+":"+d.cnonce)...)
	if d.authzid != "" {
		a1 = append(a1, ":"+d.authzid...)
	}
	return md5.Sum(a1)
}

// response is the response value for method AUTHENTICATE (the client's
// proof) or "" (the server's rspauth).
func (d digest) response(method string) string {
	ha1 := d.ha1()
	a2 := method + ":" + d.uri
	if d.qop == qopNameAuthInt || d.qop == qopNameAuthConf {
		a2 += ":00000000000000000000000000000000"
	}
	ha2 := md5.Sum([]byte(a2))
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
	// Protection is hadoop.rpc.protection: the levels offered to token
	// connections, in order of preference; empty means authentication.
	Protection string

	maxBuf int // the maxbuf announced, for tests; zero is 65536
}

var _ SASL = TokenServer{}

// Negotiate runs the server side of the exchange. A client that chose
// SIMPLE gets an empty user: the connection context names it.
func (s TokenServer) Negotiate(ctx context.Context, ex *SASLExchange) (string, error) {
	return negotiateServer(ctx, ex, s)
}

func (s TokenServer) offers(ex *SASLExchange) ([]*hadooppb.RpcSaslProto_SaslAuth, error) {
	levels, err := ParseProtection(s.Protection)
	if err != nil {
		return nil, err
	}
	var challenge string
	challenge, ex.nonce = digestChallenge(levels, s.maxBuf)
	auths := []*hadooppb.RpcSaslProto_SaslAuth{{
		Method: proto.String(MethodToken), Mechanism: proto.String(MechanismDigestMD5),
		Protocol: proto.String(""), ServerId: proto.String(digestRealm), Challenge: []byte(challenge),
	}}
	if s.AllowSimple {
		auths = append(auths, &hadooppb.RpcSaslProto_SaslAuth{Method: proto.String(MethodSimple), Mechanism: proto.String("")})
	}
	return auths, nil
}

// digestChallenge is a server's DIGEST-MD5 challenge offering levels (in
// order of preference) and, with privacy, every cipher this package
// speaks, announcing maxBuf when it is not the default; it returns the
// challenge and its nonce.
func digestChallenge(levels []byte, maxBuf int) (challenge, nonce string) {
	nb := make([]byte, 24)
	rand.Read(nb)
	nonce = base64.StdEncoding.EncodeToString(nb)
	qops := make([]string, len(levels))
	for i, l := range levels {
		qops[i] = digestQop(l)
	}
	challenge = fmt.Sprintf(`realm="%s",nonce="%s",qop="%s",charset=utf-8,`, digestRealm, nonce, strings.Join(qops, ","))
	if maxBuf > 0 && maxBuf != maxWrapBuffer {
		challenge += fmt.Sprintf("maxbuf=%d,", maxBuf)
	}
	if maskOf(levels)&qopPrivacy != 0 {
		challenge += `cipher="` + strings.Join(digestCiphers, ",") + `",`
	}
	return challenge + "algorithm=md5-sess", nonce
}

func (s TokenServer) accept(ctx context.Context, ex *SASLExchange, m *hadooppb.RpcSaslProto) (string, error) {
	if m.GetAuths()[0].GetMethod() == MethodSimple {
		return "", nil
	}
	levels, err := ParseProtection(s.Protection)
	if err != nil {
		return "", err
	}
	v, err := verifyDigest(m.GetToken(), ex.nonce, digestURI, maskOf(levels), s.Lookup)
	if err != nil {
		return "", err
	}
	if err := ex.Send(&hadooppb.RpcSaslProto{State: hadooppb.RpcSaslProto_SUCCESS.Enum(), Token: []byte("rspauth=" + v.rspauth)}); err != nil {
		return "", err
	}
	if v.layer != nil {
		ex.layer, ex.maxSend = v.layer, v.clientMaxBuf
	}
	return v.user, nil
}

// verifiedDigest is what a server learns from a digest response it
// accepts.
type verifiedDigest struct {
	user         string
	rspauth      string        // the server's proof, without "rspauth="
	layer        securityLayer // nil at authentication
	clientMaxBuf int           // the largest wrapped message the client takes
}

// verifyDigest checks a client's DIGEST-MD5 response to the challenge with
// nonce, for uri, at one of the levels in offered (a bit mask).
func verifyDigest(response []byte, nonce, uri string, offered byte, lookup TokenLookup) (verifiedDigest, error) {
	var v verifiedDigest
	resp, err := parseDigest(string(response))
	if err != nil {
		return v, fmt.Errorf("parse digest response: %w", err)
	}
	if resp["nonce"] != nonce {
		return v, errors.New("digest response answers another nonce")
	}
	if resp["digest-uri"] != uri {
		return v, fmt.Errorf("digest response is for %q, want %q", resp["digest-uri"], uri)
	}
	if nc, err := strconv.ParseUint(resp["nc"], 16, 32); err != nil || nc != 1 {
		return v, fmt.Errorf("digest response nonce count %q, want 00000001", resp["nc"])
	}
	// Hadoop's data-transfer clients name the token's user as authorization
	// id too; another one would act for someone else.
	if az, ok := resp["authzid"]; ok && az != resp["username"] {
		return v, fmt.Errorf("digest response asks to act as %q, not as its token", az)
	}
	qop := resp["qop"]
	if qop == "" {
		qop = qopNameAuth
	}
	level := digestLevel(qop)
	if level == 0 || level&offered == 0 {
		return v, fmt.Errorf("%w: the client chose qop %q; this server requires %s", ErrProtection, qop, protectionNames(offered))
	}
	cipherName := ""
	if level == qopPrivacy {
		cipherName = resp["cipher"]
		if !containsToken(strings.Join(digestCiphers, ","), cipherName) {
			return v, fmt.Errorf("digest response chose cipher %q, which this server does not offer", cipherName)
		}
	}
	v.clientMaxBuf = maxWrapBuffer
	if mb, ok := resp["maxbuf"]; ok {
		if v.clientMaxBuf, err = parseMaxBuf(mb); err != nil {
			return v, fmt.Errorf("digest response: %w", err)
		}
	}
	id, err := base64.StdEncoding.DecodeString(resp["username"])
	if err != nil {
		return v, fmt.Errorf("digest user name is not a base64 token identifier: %w", err)
	}
	pw, user, err := lookup(id)
	if err != nil {
		return v, fmt.Errorf("%w: %v", ErrTokenRejected, err)
	}
	d := digest{
		user: resp["username"], realm: resp["realm"], password: base64.StdEncoding.EncodeToString(pw),
		nonce: nonce, cnonce: resp["cnonce"], nc: resp["nc"], qop: qop, uri: uri, authzid: resp["authzid"],
	}
	if subtle.ConstantTimeCompare([]byte(d.response("AUTHENTICATE")), []byte(resp["response"])) != 1 {
		return v, fmt.Errorf("%w: digest response does not match the password of the token for %s", ErrTokenRejected, user)
	}
	if level != qopAuthentication {
		if v.layer, err = newDigestLayer(d.ha1(), level, cipherName, false); err != nil {
			return v, err
		}
	}
	v.user, v.rspauth = user, d.response("")
	return v, nil
}
