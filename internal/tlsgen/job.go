package tlsgen

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"
)

// DriverName is the name every driver certificate of a job carries and
// executors verify: they dial the driver at whatever address it
// advertises, and only the driver holds a server certificate of the
// job's CA, so the name need not be a host's.
const DriverName = "spindle-driver"

// ExecutorName is the common name of a job's executor certificate.
const ExecutorName = "spindle-executor"

// JobValidity is how long a job's CA and certificates stay valid: longer
// than any job runs, and they die with it (the CA's key is never written).
const JobValidity = 365 * 24 * time.Hour

// JobCA is a job's own certificate authority, made when the job is
// submitted and kept in the driver's memory only: it signs the driver's
// server certificates and the one client certificate its executors share,
// so nothing from another job, or from the standalone cluster's CA,
// passes its checks.
type JobCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

// NewJobCA makes the certificate authority of job jobID.
func NewJobCA(jobID string) (*JobCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate the job's CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "spindle job " + jobID, Organization: []string{"Spindle"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(JobValidity),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("make the job's CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("read the job's CA certificate back: %w", err)
	}
	return &JobCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// CertPEM is the CA's certificate, which clients verify servers with.
func (ca *JobCA) CertPEM() []byte { return ca.certPEM }

// Pool is a pool holding the CA's certificate only.
func (ca *JobCA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// issue signs a new key for name, for one use (server or client), valid
// for hosts.
func (ca *JobCA) issue(name string, usage x509.ExtKeyUsage, hosts []string) (certDER []byte, key *ecdsa.PrivateKey, err error) {
	key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate the key of %s: %w", name, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name, Organization: []string{"Spindle"}},
		NotBefore: now.Add(-time.Hour), NotAfter: ca.cert.NotAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	nameHosts(tmpl, hosts)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign the certificate of %s: %w", name, err)
	}
	return der, key, nil
}

// ServerConfig returns the TLS settings of a driver endpoint: a new
// server certificate named DriverName and hosts (the addresses clients
// other than executors dial), and clientAuth for the clients'
// certificates, which are checked against this CA.
func (ca *JobCA) ServerConfig(hosts []string, clientAuth tls.ClientAuthType) (*tls.Config, error) {
	der, key, err := ca.issue(DriverName, x509.ExtKeyUsageServerAuth, append([]string{DriverName}, hosts...))
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		ClientCAs:    ca.Pool(), ClientAuth: clientAuth,
		MinVersion: tls.VersionTLS12,
	}, nil
}

// ExecutorBundle returns what the job's executors need, as PEM: the CA's
// certificate, a client certificate and its key. It is a secret: it
// travels to executors the way the job's secret does.
func (ca *JobCA) ExecutorBundle() (string, error) {
	der, key, err := ca.issue(ExecutorName, x509.ExtKeyUsageClientAuth, nil)
	if err != nil {
		return "", err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", fmt.Errorf("encode the executors' key: %w", err)
	}
	var b strings.Builder
	b.Write(ca.certPEM)
	b.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	b.Write(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}))
	return b.String(), nil
}

// ErrBadBundle is returned for an executor bundle that is not a job CA's
// certificate, a certificate it signed and that certificate's key.
var ErrBadBundle = errors.New("tlsgen: not a job's TLS bundle")

// ExecutorConfig returns an executor's client TLS settings from the
// bundle ExecutorBundle made: it presents the bundle's certificate and
// accepts only a server certificate named DriverName from the job's CA.
func ExecutorConfig(bundle string) (*tls.Config, error) {
	var ca, leaf *x509.Certificate
	var key *ecdsa.PrivateKey
	rest := []byte(bundle)
	for {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		switch block.Type {
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrBadBundle, err)
			}
			if c.IsCA {
				ca = c
			} else {
				leaf = c
			}
		case "EC PRIVATE KEY":
			k, err := x509.ParseECPrivateKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrBadBundle, err)
			}
			key = k
		}
	}
	if ca == nil || leaf == nil || key == nil {
		return nil, fmt.Errorf("%w: want the CA's certificate, the executors' certificate and its key", ErrBadBundle)
	}
	if err := leaf.CheckSignatureFrom(ca); err != nil {
		return nil, fmt.Errorf("%w: the executors' certificate is not the CA's: %v", ErrBadBundle, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{leaf.Raw}, PrivateKey: key, Leaf: leaf}},
		RootCAs:      pool, ServerName: DriverName,
		MinVersion: tls.VersionTLS13,
	}, nil
}
