package hadooprpc

import (
	"context"
	"errors"
	"fmt"
	"strings"

	krbclient "github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/service"
	"github.com/jcmturner/gokrb5/v8/spnego"
	"github.com/jcmturner/gokrb5/v8/types"
	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
)

// Hadoop's names for Kerberos authentication.
const (
	MethodKerberos  = "KERBEROS"
	MechanismGSSAPI = "GSSAPI"
	hostPlaceholder = "_HOST"
)

// KerberosAuth is the client side of Hadoop's KERBEROS authentication:
// SASL GSSAPI with a service ticket for the server's principal, at the
// quality of protection hadoop.rpc.protection asks for: with integrity
// every later message is signed, with privacy encrypted (RFC 4121 wrap
// tokens under the ticket's session key).
type KerberosAuth struct {
	// Client holds the user's Kerberos login (a ticket cache or a keytab).
	Client *krbclient.Client
	// Principal is the server's principal as the site files name it
	// (dfs.namenode.kerberos.principal, yarn.resourcemanager.principal:
	// nn/_HOST@REALM); empty takes the protocol and server id the server
	// offers. _HOST becomes Host, or when Host is empty the host the
	// connection dialed.
	Principal string
	Host      string
	// Protection is hadoop.rpc.protection: the levels this client accepts,
	// in order of preference; empty means authentication.
	Protection string
}

var _ ClientSASL = KerberosAuth{}

// servicePrincipal is the name to get a ticket for, without the realm.
func (a KerberosAuth) servicePrincipal(offer *hadooppb.RpcSaslProto_SaslAuth, dialedHost string) (string, error) {
	p := a.Principal
	if p == "" {
		if offer.GetProtocol() == "" || offer.GetServerId() == "" {
			return "", errors.New("the server names no principal and none is configured (set the server's principal key, such as yarn.resourcemanager.principal)")
		}
		return offer.GetProtocol() + "/" + offer.GetServerId(), nil
	}
	p, _, _ = strings.Cut(p, "@")
	if strings.Contains(p, hostPlaceholder) {
		host := a.Host
		if host == "" {
			host = dialedHost
		}
		if host == "" {
			return "", fmt.Errorf("principal %s names _HOST but the server's host is not known", a.Principal)
		}
		p = strings.ReplaceAll(p, hostPlaceholder, strings.ToLower(host))
	}
	return p, nil
}

// Negotiate runs the exchange: NEGOTIATE, the server's offer, INITIATE
// with the Kerberos AP-REQ, the server's security-layer offer (a GSS wrap
// token), the client's choice, SUCCESS.
func (a KerberosAuth) Negotiate(ctx context.Context, ex *SASLExchange) error {
	if a.Client == nil {
		return errors.New("kerberos: no login (kinit, or a principal and keytab)")
	}
	want, err := ParseProtection(a.Protection)
	if err != nil {
		return err
	}
	offer, err := ex.offer(MethodKerberos, MechanismGSSAPI, "Kerberos")
	if err != nil {
		return err
	}
	spn, err := a.servicePrincipal(offer, ex.ServerHost())
	if err != nil {
		return err
	}
	tkt, key, err := a.Client.GetServiceTicket(spn)
	if err != nil {
		return fmt.Errorf("kerberos: get a ticket for %s: %w", spn, err)
	}
	tok, err := spnego.NewKRB5TokenAPREQ(a.Client, tkt, key, []int{gssapi.ContextFlagInteg, gssapi.ContextFlagConf}, nil)
	if err != nil {
		return fmt.Errorf("kerberos: make the AP-REQ for %s: %w", spn, err)
	}
	b, err := tok.Marshal()
	if err != nil {
		return fmt.Errorf("kerberos: encode the AP-REQ: %w", err)
	}
	auth := proto.Clone(offer).(*hadooppb.RpcSaslProto_SaslAuth)
	auth.Challenge = nil
	if err := ex.Send(&hadooppb.RpcSaslProto{State: hadooppb.RpcSaslProto_INITIATE.Enum(), Token: b, Auths: []*hadooppb.RpcSaslProto_SaslAuth{auth}}); err != nil {
		return err
	}
	m, err := ex.Recv()
	if err != nil {
		return err
	}
	if m.GetState() != hadooppb.RpcSaslProto_CHALLENGE {
		return fmt.Errorf("server answered %v to the AP-REQ for %s", m.GetState(), spn)
	}
	var layers gssapi.WrapToken
	if err := layers.Unmarshal(m.GetToken(), true); err != nil {
		return fmt.Errorf("kerberos: the server's security-layer offer: %w", err)
	}
	if ok, err := layers.Verify(key, keyusage.GSSAPI_ACCEPTOR_SEAL); !ok {
		return fmt.Errorf("kerberos: the server's security-layer offer does not verify (is it really %s?): %v", spn, err)
	}
	if len(layers.Payload) < 4 {
		return fmt.Errorf("kerberos: security-layer offer of %d bytes, want 4", len(layers.Payload))
	}
	offered := layers.Payload[0]
	chosen := byte(0)
	for _, l := range want {
		if offered&l != 0 {
			chosen = l
			break
		}
	}
	if chosen == 0 {
		return fmt.Errorf("%w: the server at %s (%s) requires hadoop.rpc.protection %s, and this client is configured for %s: set hadoop.rpc.protection in core-site.xml to what the cluster uses",
			ErrProtection, ex.ServerHost(), spn, protectionNames(offered), protectionNames(maskOf(want)))
	}
	payload := securityLayerPayload(chosen, 0)
	if chosen != qopAuthentication {
		payload = securityLayerPayload(chosen, maxWrapBuffer)
		ex.layer = &gssLayer{key: key, privacy: chosen == qopPrivacy, sendSeq: 1}
		ex.maxSend = int(layers.Payload[1])<<16 | int(layers.Payload[2])<<8 | int(layers.Payload[3])
	}
	reply, err := gssapi.NewInitiatorWrapToken(payload, key)
	if err != nil {
		return fmt.Errorf("kerberos: answer the security-layer offer: %w", err)
	}
	rb, err := reply.Marshal()
	if err != nil {
		return err
	}
	if err := ex.Send(&hadooppb.RpcSaslProto{State: hadooppb.RpcSaslProto_RESPONSE.Enum(), Token: rb}); err != nil {
		return err
	}
	m, err = ex.Recv()
	if err != nil {
		return err
	}
	if m.GetState() != hadooppb.RpcSaslProto_SUCCESS {
		return fmt.Errorf("server answered %v to the security-layer choice", m.GetState())
	}
	return nil
}

// KerberosServer is the server side of KERBEROS authentication, for
// Spindle's test servers: it accepts AP-REQs for its principal
// (Protocol/ServerID) with the keys in Keytab, at the levels of
// Protection, and names the caller by the first component of its
// principal (alice@REALM and alice/host@REALM are alice).
type KerberosServer struct {
	Keytab   *keytab.Keytab
	Protocol string // nn, rm, ...
	ServerID string // the host part of the principal
	// Protection is hadoop.rpc.protection: the levels offered; empty
	// means authentication.
	Protection string
}

var _ SASL = KerberosServer{}

// Negotiate runs the server side of the exchange and returns the caller.
func (s KerberosServer) Negotiate(ctx context.Context, ex *SASLExchange) (string, error) {
	return negotiateServer(ctx, ex, s)
}

func (s KerberosServer) offers(*SASLExchange) ([]*hadooppb.RpcSaslProto_SaslAuth, error) {
	return []*hadooppb.RpcSaslProto_SaslAuth{{
		Method: proto.String(MethodKerberos), Mechanism: proto.String(MechanismGSSAPI),
		Protocol: proto.String(s.Protocol), ServerId: proto.String(s.ServerID),
	}}, nil
}

func (s KerberosServer) accept(ctx context.Context, ex *SASLExchange, m *hadooppb.RpcSaslProto) (string, error) {
	levels, err := ParseProtection(s.Protection)
	if err != nil {
		return "", err
	}
	var tok spnego.KRB5Token
	if err := tok.Unmarshal(m.GetToken()); err != nil || !tok.IsAPReq() {
		return "", fmt.Errorf("kerberos: the client's token is not an AP-REQ: %v", err)
	}
	principal := s.Protocol + "/" + s.ServerID
	ok, creds, err := service.VerifyAPREQ(&tok.APReq, service.NewSettings(s.Keytab, service.KeytabPrincipal(principal), service.DecodePAC(false)))
	if !ok {
		return "", fmt.Errorf("kerberos: AP-REQ for %s refused: %v", principal, err)
	}
	key := tok.APReq.Ticket.DecryptedEncPart.Key
	offered := maskOf(levels)
	offer, err := acceptorWrapToken(securityLayerPayload(offered, maxWrapBuffer), key)
	if err != nil {
		return "", err
	}
	if err := ex.Send(&hadooppb.RpcSaslProto{State: hadooppb.RpcSaslProto_CHALLENGE.Enum(), Token: offer}); err != nil {
		return "", err
	}
	if m, err = ex.Recv(); err != nil {
		return "", err
	}
	if m.GetState() != hadooppb.RpcSaslProto_RESPONSE {
		return "", fmt.Errorf("client sent %v, want RESPONSE", m.GetState())
	}
	var choice gssapi.WrapToken
	if err := choice.Unmarshal(m.GetToken(), false); err != nil {
		return "", fmt.Errorf("kerberos: the client's security-layer choice: %w", err)
	}
	if ok, err := choice.Verify(key, keyusage.GSSAPI_INITIATOR_SEAL); !ok {
		return "", fmt.Errorf("kerberos: the client's security-layer choice does not verify: %v", err)
	}
	if len(choice.Payload) < 4 {
		return "", fmt.Errorf("kerberos: security-layer choice of %d bytes, want 4", len(choice.Payload))
	}
	chosen := choice.Payload[0]
	if chosen&offered == 0 || chosen&(chosen-1) != 0 {
		return "", fmt.Errorf("%w: the client chose %s; this server requires hadoop.rpc.protection %s", ErrProtection, protectionNames(chosen), protectionNames(offered))
	}
	if chosen != qopAuthentication {
		ex.layer = &gssLayer{key: key, acceptor: true, privacy: chosen == qopPrivacy, sendSeq: 1}
		ex.maxSend = int(choice.Payload[1])<<16 | int(choice.Payload[2])<<8 | int(choice.Payload[3])
	}
	if err := ex.Send(&hadooppb.RpcSaslProto{State: hadooppb.RpcSaslProto_SUCCESS.Enum()}); err != nil {
		return "", err
	}
	user := creds.UserName()
	user, _, _ = strings.Cut(user, "/")
	return user, nil
}

// maskOf is the security-layer bit mask of levels.
func maskOf(levels []byte) byte {
	var m byte
	for _, l := range levels {
		m |= l
	}
	return m
}

// acceptorWrapToken is a GSS wrap token (RFC 4121) sent by the acceptor,
// with an integrity checksum and no encryption.
func acceptorWrapToken(payload []byte, key types.EncryptionKey) ([]byte, error) {
	et, err := crypto.GetEtype(key.KeyType)
	if err != nil {
		return nil, fmt.Errorf("kerberos: session key type %d: %w", key.KeyType, err)
	}
	t := gssapi.WrapToken{Flags: 0x01, EC: uint16(et.GetHMACBitLength() / 8), Payload: payload}
	if err := t.SetCheckSum(key, keyusage.GSSAPI_ACCEPTOR_SEAL); err != nil {
		return nil, fmt.Errorf("kerberos: sign the security-layer offer: %w", err)
	}
	return t.Marshal()
}
