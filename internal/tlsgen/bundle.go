package tlsgen

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
)

// ServerBundle returns, as PEM, the CA's certificate, a new server
// certificate named name and its key: what a server that runs elsewhere
// than the CA's holder needs (a YARN ApplicationMaster). It is a secret:
// it travels the way the job's secret does.
func (ca *JobCA) ServerBundle(name string) (string, error) {
	der, key, err := ca.issue(name, x509.ExtKeyUsageServerAuth, []string{name})
	if err != nil {
		return "", err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", fmt.Errorf("encode the key of %s: %w", name, err)
	}
	var b strings.Builder
	b.Write(ca.certPEM)
	b.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	b.Write(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}))
	return b.String(), nil
}

// parsedBundle is a bundle's CA, leaf certificate and key.
type parsedBundle struct {
	ca, leaf *x509.Certificate
	key      *ecdsa.PrivateKey
}

// parseBundle reads a bundle of ExecutorBundle or ServerBundle.
func parseBundle(bundle string) (parsedBundle, error) {
	var p parsedBundle
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
				return p, fmt.Errorf("%w: %v", ErrBadBundle, err)
			}
			if c.IsCA {
				p.ca = c
			} else {
				p.leaf = c
			}
		case "EC PRIVATE KEY":
			k, err := x509.ParseECPrivateKey(block.Bytes)
			if err != nil {
				return p, fmt.Errorf("%w: %v", ErrBadBundle, err)
			}
			p.key = k
		}
	}
	if p.ca == nil || p.leaf == nil || p.key == nil {
		return p, fmt.Errorf("%w: want the CA's certificate, a certificate it signed and its key", ErrBadBundle)
	}
	if err := p.leaf.CheckSignatureFrom(p.ca); err != nil {
		return p, fmt.Errorf("%w: the certificate is not the CA's: %v", ErrBadBundle, err)
	}
	return p, nil
}

// BundleServerConfig returns the TLS 1.3 server settings of a bundle
// ServerBundle made.
func BundleServerConfig(bundle string) (*tls.Config, error) {
	p, err := parseBundle(bundle)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{p.leaf.Raw}, PrivateKey: p.key, Leaf: p.leaf}},
		MinVersion:   tls.VersionTLS13,
	}, nil
}

// BundleClientConfig returns the TLS 1.3 settings of a client of the
// server that holds bundle (made by ServerBundle for name): it accepts
// only that CA's certificate for name, whatever address it dials.
func BundleClientConfig(bundle, name string) (*tls.Config, error) {
	p, err := parseBundle(bundle)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(p.ca)
	return &tls.Config{RootCAs: pool, ServerName: name, MinVersion: tls.VersionTLS13}, nil
}
