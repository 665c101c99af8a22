package fsys

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
)

// ErrNoDelegationToken means a namenode issued no delegation token: the
// cluster is not secure, or the caller did not authenticate with Kerberos.
var ErrNoDelegationToken = errors.New("fsys: the namenode issued no delegation token")

// tokenService is the service Hadoop names this cluster's delegation
// tokens by: ha-hdfs:<nameservice> for an HA nameservice, else the
// namenode's ip:port.
func (cl *hdfsCluster) tokenService() string {
	if cl.logical {
		return "ha-hdfs:" + cl.authority
	}
	host, port, err := net.SplitHostPort(cl.addrs[0])
	if err != nil {
		return cl.addrs[0]
	}
	if net.ParseIP(host) == nil {
		if ips, err := net.LookupHost(host); err == nil && len(ips) > 0 {
			host = ips[0]
		}
	}
	return net.JoinHostPort(host, port)
}

// delegationTokenFor finds the HDFS delegation token for cl in the
// credentials file of opts (or $HADOOP_TOKEN_FILE_LOCATION), and returns
// the file's path with it.
func delegationTokenFor(cl *hdfsCluster, opts Options) (hadooprpc.Token, string, bool, error) {
	if opts.NoTokens {
		return hadooprpc.Token{}, "", false, nil
	}
	file := opts.TokenFile
	if file == "" {
		file = os.Getenv(hadooprpc.EnvTokenFile)
	}
	if file == "" {
		return hadooprpc.Token{}, "", false, nil
	}
	creds, err := hadooprpc.ReadCredentialsFile(file)
	if err != nil {
		return hadooprpc.Token{}, "", false, fmt.Errorf("%w: %v", ErrHadoopConfig, err)
	}
	service := cl.tokenService()
	for _, t := range creds.Tokens {
		if t.Kind == hadooprpc.KindHDFSDelegationToken && t.Service == service {
			return t, file, true, nil
		}
	}
	return hadooprpc.Token{}, "", false, nil
}

// nnClient returns Spindle's own RPC client to the cluster's namenodes,
// made on first use: it fails over between HA namenodes with the loop the
// YARN client shares, in one pass, as the colinmarc client beside it
// retries on its own.
func (h *hdfsFS) nnClient() (*hadooprpc.FailoverClient, error) {
	h.nnMu.Lock()
	defer h.nnMu.Unlock()
	if h.nn == nil {
		nn, err := hadooprpc.NewFailoverClient(hadooprpc.FailoverConfig{
			Addrs:  h.cluster.addrs,
			Client: hadooprpc.ClientConfig{User: h.cluster.user, Protocol: clientProtocol, SASL: h.cluster.sasl()},
			Rounds: 1,
		})
		if err != nil {
			return nil, err
		}
		h.nn = nn
	}
	return h.nn, nil
}

// hdfsOf resolves uri to its HDFS cluster.
func (r *Resolver) hdfsOf(ctx context.Context, uri string) (*hdfsFS, error) {
	f, _, err := r.Resolve(ctx, uri)
	if err != nil {
		return nil, err
	}
	h, ok := f.(*hdfsFS)
	if !ok {
		return nil, fmt.Errorf("%s is not on HDFS: only HDFS issues delegation tokens", uri)
	}
	return h, nil
}

// DelegationToken obtains a delegation token from the namenodes of the
// HDFS cluster uri is on, which renewer (a principal's short name, as the
// ResourceManager's "yarn") may renew, named by the service Hadoop gives
// the cluster's tokens. The resolver must be logged in with Kerberos:
// namenodes issue tokens to Kerberos callers only.
func (r *Resolver) DelegationToken(ctx context.Context, uri, renewer string) (hadooprpc.Token, error) {
	h, err := r.hdfsOf(ctx, uri)
	if err != nil {
		return hadooprpc.Token{}, err
	}
	nn, err := h.nnClient()
	if err != nil {
		return hadooprpc.Token{}, err
	}
	resp := &hadooppb.GetDelegationTokenResponseProto{}
	if err := nn.Call(ctx, "getDelegationToken", &hadooppb.GetDelegationTokenRequestProto{Renewer: proto.String(renewer)}, resp); err != nil {
		return hadooprpc.Token{}, fmt.Errorf("hdfs://%s: get a delegation token (renewer %s) as %s: %w", h.cluster.authority, renewer, h.cluster.user, err)
	}
	if resp.GetToken() == nil {
		return hadooprpc.Token{}, fmt.Errorf("hdfs://%s: %w (is hadoop.security.authentication kerberos?)", h.cluster.authority, ErrNoDelegationToken)
	}
	tok := hadooprpc.TokenFromProto(resp.GetToken())
	tok.Service = h.cluster.tokenService()
	return tok, nil
}

// RenewDelegationToken extends the life of tok, a token of the cluster
// uri is on, and returns its new expiry. Only the token's renewer may.
func (r *Resolver) RenewDelegationToken(ctx context.Context, uri string, tok hadooprpc.Token) (time.Time, error) {
	h, err := r.hdfsOf(ctx, uri)
	if err != nil {
		return time.Time{}, err
	}
	nn, err := h.nnClient()
	if err != nil {
		return time.Time{}, err
	}
	resp := &hadooppb.RenewDelegationTokenResponseProto{}
	if err := nn.Call(ctx, "renewDelegationToken", &hadooppb.RenewDelegationTokenRequestProto{Token: tok.Proto()}, resp); err != nil {
		return time.Time{}, fmt.Errorf("hdfs://%s: renew %s: %w", h.cluster.authority, describeToken(tok), err)
	}
	return time.UnixMilli(int64(resp.GetNewExpiryTime())), nil
}

// CancelDelegationToken ends the life of tok, a token of the cluster uri
// is on. Its owner or renewer may.
func (r *Resolver) CancelDelegationToken(ctx context.Context, uri string, tok hadooprpc.Token) error {
	h, err := r.hdfsOf(ctx, uri)
	if err != nil {
		return err
	}
	nn, err := h.nnClient()
	if err != nil {
		return err
	}
	if err := nn.Call(ctx, "cancelDelegationToken", &hadooppb.CancelDelegationTokenRequestProto{Token: tok.Proto()}, &hadooppb.CancelDelegationTokenResponseProto{}); err != nil {
		if alreadyCancelled(err) {
			return nil
		}
		return fmt.Errorf("hdfs://%s: cancel %s: %w", h.cluster.authority, describeToken(tok), err)
	}
	return nil
}

// alreadyCancelled says whether a namenode refused to cancel a token it no
// longer knows: someone cancelled it first (a ResourceManager cancels an
// application's tokens as the application ends), which is what the
// caller wanted.
func alreadyCancelled(err error) bool {
	re, ok := errors.AsType[*hadooprpc.RemoteError](err)
	return ok && re.Class == "org.apache.hadoop.security.token.SecretManager$InvalidToken" &&
		strings.HasPrefix(re.Message, "Token not found")
}

// describeToken names a token without its password.
func describeToken(tok hadooprpc.Token) string {
	if id, err := hadooprpc.ParseDelegationTokenIdentifier(tok.Identifier); err == nil {
		return strings.TrimSpace(tok.Kind + " " + id.String())
	}
	return tok.String()
}
