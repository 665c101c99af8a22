package tlsgen

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// File names in a CA directory.
const (
	CAFile    = "ca.pem"
	CAKeyFile = "ca-key.pem"
)

// DefaultValidity is how long certificates stay valid by default.
const DefaultValidity = 5 * 365 * 24 * time.Hour

// Files are the three files a node's TLS settings name.
type Files struct {
	Cert, Key, CA string
}

// CreateCA writes a new certificate authority (CAFile and CAKeyFile) into
// dir, which is created if missing.
func CreateCA(dir, name string, validity time.Duration) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	certPath, keyPath := filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	if err := refuseExisting(certPath, keyPath); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate the CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name, Organization: []string{"Spindle"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("make the CA certificate: %w", err)
	}
	return writeKeyAndCert(keyPath, certPath, key, der)
}

// CreateCert writes a certificate for name, valid for hosts (DNS names or
// IP addresses, the ones others dial it at), signed by the CA in caDir,
// into outDir as NAME.pem and NAME-key.pem, and returns the files a node's
// settings name (with the CA's certificate).
func CreateCert(caDir, outDir, name string, hosts []string, validity time.Duration) (Files, error) {
	if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return Files{}, fmt.Errorf("certificate name %q: want a plain name such as master-1", name)
	}
	ca, caKey, err := loadCA(caDir)
	if err != nil {
		return Files{}, err
	}
	if err := os.MkdirAll(outDir, 0o700); err != nil {
		return Files{}, fmt.Errorf("create %s: %w", outDir, err)
	}
	files := Files{Cert: filepath.Join(outDir, name+".pem"), Key: filepath.Join(outDir, name+"-key.pem"), CA: filepath.Join(caDir, CAFile)}
	if err := refuseExisting(files.Cert, files.Key); err != nil {
		return Files{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Files{}, fmt.Errorf("generate the key of %s: %w", name, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name, Organization: []string{"Spindle"}},
		NotBefore: now.Add(-time.Hour), NotAfter: minTime(now.Add(validity), ca.NotAfter),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	nameHosts(tmpl, hosts)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return Files{}, fmt.Errorf("sign the certificate of %s: %w", name, err)
	}
	return files, writeKeyAndCert(files.Key, files.Cert, key, der)
}

// loadCA reads the CA in dir.
func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPath, keyPath := filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	cb, err := readPEM(certPath, "CERTIFICATE")
	if err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(cb)
	if err != nil || !ca.IsCA {
		return nil, nil, fmt.Errorf("%s: not a CA certificate (make one with spindle tls ca)", certPath)
	}
	kb, err := readPEM(keyPath, "EC PRIVATE KEY")
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", keyPath, err)
	}
	return ca, key, nil
}

func readPEM(path, typ string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != typ {
		return nil, fmt.Errorf("%s: no %s in it", path, typ)
	}
	return block.Bytes, nil
}

// refuseExisting fails, naming the file, when any of paths exists.
func refuseExisting(paths ...string) error {
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s exists: not overwriting it (remove it first to make a new one)", p)
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("check %s: %w", p, err)
		}
	}
	return nil
}

// writeKeyAndCert writes the key (owner-only) and then the certificate,
// each through a temporary file renamed into place.
func writeKeyAndCert(keyPath, certPath string, key *ecdsa.PrivateKey, der []byte) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode the key: %w", err)
	}
	if err := writeAtomic(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return err
	}
	if err := writeAtomic(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		_ = os.Remove(keyPath)
		return err
	}
	return nil
}

func writeAtomic(path string, b []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// Link, not rename: a file that appeared meanwhile is not replaced.
		err = os.Link(tmp, path)
	}
	_ = os.Remove(tmp)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// nameHosts puts hosts (names or IP addresses; blanks skipped) in the
// certificate's subject alternative names.
func nameHosts(tmpl *x509.Certificate, hosts []string) {
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		switch ip := net.ParseIP(h); {
		case h == "":
		case ip != nil:
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		default:
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
