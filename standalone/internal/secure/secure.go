package secure

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/spindle-ml/spindle/internal/auth"
)

// EnvSecret is the environment variable that may hold the cluster secret.
const EnvSecret = "SPINDLE_CLUSTER_SECRET"

// ErrNoSecret is returned when no source holds a cluster secret.
var ErrNoSecret = errors.New("secure: no cluster secret configured")

// SecretSources are the places a cluster secret may come from, in order of
// precedence: a file, a configuration value, the environment.
type SecretSources struct {
	// File is a file holding the secret (spindle.cluster.secretFile). It
	// must not be readable by group or others.
	File string
	// Value is the secret itself (spindle.cluster.secret).
	Value string
	// Env looks up environment variables; nil uses os.Getenv.
	Env func(string) string
}

// ResolveSecret returns the cluster secret from the first source that has
// one. Surrounding white space in files and variables is ignored.
func ResolveSecret(src SecretSources) (string, error) {
	getenv := src.Env
	if getenv == nil {
		getenv = os.Getenv
	}
	var secret, from string
	switch {
	case src.File != "":
		fi, err := os.Stat(src.File)
		if err != nil {
			return "", fmt.Errorf("read cluster secret file: %w", err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return "", fmt.Errorf("cluster secret file %s is readable by group or others (mode %04o): run chmod 600 %s",
				src.File, fi.Mode().Perm(), src.File)
		}
		b, err := os.ReadFile(src.File)
		if err != nil {
			return "", fmt.Errorf("read cluster secret file: %w", err)
		}
		secret, from = strings.TrimSpace(string(b)), "file "+src.File
	case src.Value != "":
		secret, from = src.Value, "spindle.cluster.secret"
	case getenv(EnvSecret) != "":
		secret, from = strings.TrimSpace(getenv(EnvSecret)), "$"+EnvSecret
	default:
		return "", fmt.Errorf("%w: set spindle.cluster.secretFile, spindle.cluster.secret or $%s (the same value on every master, worker and driver)", ErrNoSecret, EnvSecret)
	}
	if len(secret) < auth.MinSecretLen {
		return "", fmt.Errorf("cluster secret from %s: %w", from, auth.ErrWeakSecret)
	}
	return secret, nil
}

// TLSFiles name the PEM files for mutual TLS. Either all three are set or
// none (plain TCP, still authenticated by the secret).
type TLSFiles struct {
	CertFile string
	KeyFile  string
	CAFile   string
}

// Enabled says whether any file is set.
func (f TLSFiles) Enabled() bool { return f.CertFile != "" || f.KeyFile != "" || f.CAFile != "" }

// Credentials sign and check calls with the cluster secret and, when
// configured, wrap connections in mutual TLS.
type Credentials struct {
	secret    []byte
	signer    *auth.Signer
	serverTLS *tls.Config
	clientTLS *tls.Config
}

// New returns credentials for secret and the optional TLS files.
func New(secret string, files TLSFiles) (*Credentials, error) {
	signer, err := auth.NewSigner(secret)
	if err != nil {
		return nil, fmt.Errorf("cluster secret: %w", err)
	}
	c := &Credentials{secret: []byte(secret), signer: signer}
	if !files.Enabled() {
		return c, nil
	}
	if files.CertFile == "" || files.KeyFile == "" || files.CAFile == "" {
		return nil, fmt.Errorf("mutual TLS needs spindle.cluster.tls.certFile, keyFile and caFile; got cert %q, key %q, ca %q",
			files.CertFile, files.KeyFile, files.CAFile)
	}
	cert, err := tls.LoadX509KeyPair(files.CertFile, files.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("load TLS certificate %s and key %s: %w", files.CertFile, files.KeyFile, err)
	}
	caPEM, err := os.ReadFile(files.CAFile)
	if err != nil {
		return nil, fmt.Errorf("read TLS CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("TLS CA file %s holds no PEM certificate", files.CAFile)
	}
	c.serverTLS = &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
	}
	c.clientTLS = &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		MinVersion:   tls.VersionTLS12,
	}
	return c, nil
}

// Secret returns the shared secret, for handshakes outside gRPC (the Raft
// transport).
func (c *Credentials) Secret() []byte { return c.secret }

// Signer returns the signer of the cluster secret.
func (c *Credentials) Signer() *auth.Signer { return c.signer }

// ServerTLS returns the server side TLS configuration, nil without TLS.
func (c *Credentials) ServerTLS() *tls.Config { return c.serverTLS }

// ClientTLS returns the client side TLS configuration for dialing host,
// nil without TLS.
func (c *Credentials) ClientTLS(host string) *tls.Config {
	if c.clientTLS == nil {
		return nil
	}
	t := c.clientTLS.Clone()
	t.ServerName = host
	return t
}

// WorkerAudience is the audience of the calls to the worker that
// advertises addr: workers share the cluster secret, and a token made for
// one of them (a Launch captured on the wire) is refused by every other.
func WorkerAudience(addr string) string { return "spindle-worker " + addr }

// MasterAudience is the audience of the calls to the master that a client
// dials at addr (host:port, as the client names it): a token made for one
// master is refused by the others of the cluster and by any other server
// of the same secret.
func MasterAudience(addr string) string { return "spindle-master " + addr }

// ServerOptions returns the gRPC server options that refuse unsigned calls
// (and, with TLS, connections without a client certificate from the CA).
func (c *Credentials) ServerOptions() []grpc.ServerOption {
	return c.serverOptions(c.signer)
}

// ServerOptionsAs is ServerOptions for a server that takes only tokens
// made for audience (WorkerAudience).
func (c *Credentials) ServerOptionsAs(audience string) []grpc.ServerOption {
	return c.serverOptions(c.signer.For(audience))
}

// ServerOptionsAsAny is ServerOptions for a server known by several
// names that takes tokens made for any of audiences (MasterAudience of
// each).
func (c *Credentials) ServerOptionsAsAny(audiences []string) []grpc.ServerOption {
	return c.serverOptions(c.signer.ForAny(audiences...))
}

func (c *Credentials) serverOptions(signer *auth.Signer) []grpc.ServerOption {
	opts := append(signer.ServerOptions(),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveTime / 2, PermitWithoutStream: true}))
	if c.serverTLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(c.serverTLS)))
	}
	return opts
}

// DialOptions returns the gRPC dial options that sign every call.
func (c *Credentials) DialOptions() []grpc.DialOption {
	return c.dialOptions(c.signer)
}

// DialOptionsTo is DialOptions for calls to the one server of audience
// (WorkerAudience).
func (c *Credentials) DialOptionsTo(audience string) []grpc.DialOption {
	return c.dialOptions(c.signer.For(audience))
}

func (c *Credentials) dialOptions(signer *auth.Signer) []grpc.DialOption {
	tc := insecure.NewCredentials()
	if c.clientTLS != nil {
		tc = credentials.NewTLS(c.clientTLS.Clone())
	}
	return append(signer.DialOptions(),
		grpc.WithTransportCredentials(tc),
		// A master or worker whose machine vanished without closing its
		// connections (power loss, partition) is noticed within seconds,
		// also by long-lived watch streams.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: keepaliveTime, Timeout: keepaliveTimeout, PermitWithoutStream: true}),
	)
}

// Keepalive timing of every connection between cluster members.
const (
	keepaliveTime    = 10 * time.Second
	keepaliveTimeout = 5 * time.Second
)
