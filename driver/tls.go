package driver

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/spindle-ml/spindle/internal/envcontract"
	"github.com/spindle-ml/spindle/internal/tlsgen"
)

// jobTLS is a job's TLS (spindle.job.tls.enabled): its CA, which lives in
// the driver's memory only, the control plane's server settings and the
// bundle executors get.
type jobTLS struct {
	ca      *tlsgen.JobCA
	control *tls.Config
	bundle  string
}

// newJobTLS makes job jobID's CA, the control plane's server certificate
// and the executors' client certificate.
func newJobTLS(jobID string) (*jobTLS, error) {
	ca, err := tlsgen.NewJobCA(jobID)
	if err != nil {
		return nil, fmt.Errorf("spindle.job.tls.enabled: %w", err)
	}
	control, err := ca.ServerConfig(nil, tls.RequireAndVerifyClientCert)
	if err != nil {
		return nil, fmt.Errorf("spindle.job.tls.enabled: %w", err)
	}
	// Only the job's executors connect: both ends are Spindle's.
	control.MinVersion = tls.VersionTLS13
	bundle, err := ca.ExecutorBundle()
	if err != nil {
		return nil, fmt.Errorf("spindle.job.tls.enabled: %w", err)
	}
	return &jobTLS{ca: ca, control: control, bundle: bundle}, nil
}

// serverOptions are the control plane's transport options: mutual TLS
// with the job's CA, or none (plain text) without job TLS.
func (t *jobTLS) serverOptions() []grpc.ServerOption {
	if t == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(t.control))}
}

// pushServerConfig is the TLS of a flight-put: endpoint at adv (host:port)
// that the input named with host given (may be empty): its certificate
// names those hosts and this host's loopback names, so producers verify
// it at any of them with the job's CA. Producers present no certificate
// (their token authenticates them); the ranks present theirs.
func (t *jobTLS) pushServerConfig(adv, given string) (*tls.Config, error) {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if h, _, err := net.SplitHostPort(adv); err == nil {
		hosts = append(hosts, h)
	}
	if given != "" {
		hosts = append(hosts, given)
	}
	if name, err := os.Hostname(); err == nil {
		hosts = append(hosts, name)
	}
	cfg, err := t.ca.ServerConfig(hosts, tls.VerifyClientCertIfGiven)
	if err != nil {
		return nil, fmt.Errorf("spindle.job.tls.enabled: the push endpoint's certificate: %w", err)
	}
	return cfg, nil
}

// executorEnv is the secret environment every executor starts with: the
// job's secret and, with job TLS, its TLS bundle. Cluster managers carry
// it as they carry secrets (the process environment the executor clears
// at start, YARN container credentials).
func (d *Driver) executorEnv() map[string]string {
	env := map[string]string{envcontract.JobSecret: d.secret}
	if d.tls != nil {
		env[envcontract.JobTLS] = d.tls.bundle
	}
	return env
}

// transportOf says how a control-plane call reached the driver: "mutual
// TLS 1.3 (spindle-executor)" with the client certificate's name, or
// "plain text".
func transportOf(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "unknown"
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return "plain text"
	}
	st := info.State
	if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return "TLS " + tls.VersionName(st.Version)[4:] + " without a client certificate"
	}
	return "mutual TLS " + tls.VersionName(st.Version)[4:] + " (" + st.PeerCertificates[0].Subject.CommonName + ")"
}
