package hdfstest

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
)

// classInvalidToken is what a namenode answers for a token it does not
// accept (expired, cancelled, unknown).
const classInvalidToken = "org.apache.hadoop.security.token.SecretManager$InvalidToken"

// tokenManager is the namenode's delegation-token secret manager: it
// issues tokens to Kerberos callers, renews them for their renewer up to
// their maximum lifetime, cancels them, and checks them for TOKEN
// authentication.
type tokenManager struct {
	renewInterval, maxLifetime time.Duration
	key                        []byte
	now                        func() time.Time

	mu      sync.Mutex
	nextSeq int32
	live    map[int32]time.Time // sequence number -> expiry
	issued  int
	renewed int
}

func newTokenManager(renew, max time.Duration) *tokenManager {
	key := make([]byte, 20)
	rand.Read(key)
	return &tokenManager{renewInterval: renew, maxLifetime: max, key: key, now: time.Now, nextSeq: 1, live: map[int32]time.Time{}}
}

func (m *tokenManager) password(id []byte) []byte {
	h := hmac.New(sha1.New, m.key)
	h.Write(id)
	return h.Sum(nil)
}

// lookup checks a token identifier for TOKEN authentication.
func (m *tokenManager) lookup(id []byte) ([]byte, string, error) {
	d, err := hadooprpc.ParseDelegationTokenIdentifier(id)
	if err != nil {
		return nil, "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	exp, ok := m.live[d.SequenceNumber]
	switch {
	case !ok:
		return nil, "", fmt.Errorf("%s can't be found in cache", d)
	case m.now().After(exp):
		return nil, "", fmt.Errorf("%s is expired, current time: %s expected renewal time: %s", d, m.now().UTC().Format(time.RFC3339Nano), exp.UTC().Format(time.RFC3339Nano))
	}
	return m.password(id), d.Owner, nil
}

func kerberosOnly(ctx context.Context, what string) (hadooprpc.Caller, error) {
	c, _ := hadooprpc.CallerFromContext(ctx)
	if c.Auth != hadooprpc.MethodKerberos {
		return c, remoteErr(classIOException, "Delegation Token can be %s only with kerberos or web authentication", what)
	}
	return c, nil
}

func (nn *namenode) getDelegationToken(ctx context.Context, u *user, req *hadooppb.GetDelegationTokenRequestProto) (*hadooppb.GetDelegationTokenResponseProto, error) {
	m := nn.tokens
	if m == nil {
		// An insecure namenode issues no tokens.
		return &hadooppb.GetDelegationTokenResponseProto{}, nil
	}
	if _, err := kerberosOnly(ctx, "issued"); err != nil {
		return nil, err
	}
	if req.GetRenewer() == "" {
		return nil, remoteErr(classIOException, "no renewer given for the delegation token")
	}
	return &hadooppb.GetDelegationTokenResponseProto{Token: m.issue(u.name, req.GetRenewer())}, nil
}

// issue makes a token for owner that renewer may renew, alive for the
// renewal interval.
func (m *tokenManager) issue(owner, renewer string) *hadooppb.TokenProto {
	m.mu.Lock()
	now := m.now()
	d := hadooprpc.DelegationTokenIdentifier{Owner: owner, Renewer: renewer, IssueDate: now, MaxDate: now.Add(m.maxLifetime), SequenceNumber: m.nextSeq, MasterKeyID: 1}
	m.nextSeq++
	m.live[d.SequenceNumber] = now.Add(m.renewInterval)
	m.issued++
	m.mu.Unlock()
	id := d.Marshal()
	return &hadooppb.TokenProto{Identifier: id, Password: m.password(id), Kind: proto.String(hadooprpc.KindHDFSDelegationToken), Service: proto.String("")}
}

// checked returns the identifier of a token the caller presents, checking
// that this namenode made it.
func (m *tokenManager) checked(tok *hadooppb.TokenProto) (hadooprpc.DelegationTokenIdentifier, error) {
	d, err := hadooprpc.ParseDelegationTokenIdentifier(tok.GetIdentifier())
	if err != nil {
		return d, remoteErr(classInvalidToken, "%v", err)
	}
	if !hmac.Equal(m.password(tok.GetIdentifier()), tok.GetPassword()) {
		return d, remoteErr(classInvalidToken, "%s: password does not match", d)
	}
	return d, nil
}

func (nn *namenode) renewDelegationToken(ctx context.Context, u *user, req *hadooppb.RenewDelegationTokenRequestProto) (*hadooppb.RenewDelegationTokenResponseProto, error) {
	m := nn.tokens
	if m == nil {
		return nil, remoteErr(classIOException, "this namenode issues no delegation tokens")
	}
	if _, err := kerberosOnly(ctx, "renewed"); err != nil {
		return nil, err
	}
	exp, err := m.renew(req.GetToken(), u.name)
	if err != nil {
		return nil, err
	}
	return &hadooppb.RenewDelegationTokenResponseProto{NewExpiryTime: proto.Uint64(uint64(exp.UnixMilli()))}, nil
}

// renew extends tok's life by the renewal interval, up to its maximum
// date, for its renewer; a token past its maximum date, or cancelled, is
// refused.
func (m *tokenManager) renew(tok *hadooppb.TokenProto, user string) (time.Time, error) {
	d, err := m.checked(tok)
	if err != nil {
		return time.Time{}, err
	}
	if d.Renewer != user {
		return time.Time{}, remoteErr(classAccessControl, "%s tries to renew a token (%s) with non-matching renewer %s", user, d, d.Renewer)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if _, ok := m.live[d.SequenceNumber]; !ok {
		return time.Time{}, remoteErr(classInvalidToken, "Renewal request for unknown token %s", d)
	}
	if now.After(d.MaxDate) {
		return time.Time{}, remoteErr(classInvalidToken, "%s can't be renewed: current time %s is after its max date", d, now.UTC().Format(time.RFC3339))
	}
	exp := now.Add(m.renewInterval)
	if exp.After(d.MaxDate) {
		exp = d.MaxDate
	}
	m.live[d.SequenceNumber] = exp
	m.renewed++
	return exp, nil
}

func (nn *namenode) cancelDelegationToken(ctx context.Context, u *user, req *hadooppb.CancelDelegationTokenRequestProto) (*hadooppb.CancelDelegationTokenResponseProto, error) {
	m := nn.tokens
	if m == nil {
		return nil, remoteErr(classIOException, "this namenode issues no delegation tokens")
	}
	d, err := m.checked(req.GetToken())
	if err != nil {
		return nil, err
	}
	if u.name != d.Owner && u.name != d.Renewer {
		return nil, remoteErr(classAccessControl, "%s is not authorized to cancel the token %s", u.name, d)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.live[d.SequenceNumber]; !ok {
		return nil, remoteErr(classInvalidToken, "Token not found %s", d)
	}
	delete(m.live, d.SequenceNumber)
	return &hadooppb.CancelDelegationTokenResponseProto{}, nil
}

// TokenStats counts the delegation tokens the namenode issued and renewed.
func (c *Cluster) TokenStats() (issued, renewed int) {
	m := c.nn.tokens
	if m == nil {
		return 0, 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.issued, m.renewed
}
