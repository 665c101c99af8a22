package tlsgen

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMutualTLS: a CA and two certificates it signed carry a real mutual
// TLS handshake, each side checking the other against the CA.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca")
	if err := CreateCA(ca, "test CA", time.Hour); err != nil {
		t.Fatal(err)
	}
	server, err := CreateCert(ca, filepath.Join(dir, "certs"), "master-1", []string{"127.0.0.1", "master-1.example"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	client, err := CreateCert(ca, filepath.Join(dir, "certs"), "gateway", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{server.Key, client.Key, filepath.Join(ca, CAKeyFile)} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want owner-only", p, err, fi.Mode())
		}
	}
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(server.CA)
	pool.AppendCertsFromPEM(caPEM)
	load := func(f Files) tls.Certificate {
		c, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	lis, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{load(server)},
		ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		c, err := lis.Accept()
		if err == nil {
			_, _ = c.Write([]byte("hello"))
			c.Close()
		}
	}()
	conn, err := tls.Dial("tcp", lis.Addr().String(), &tls.Config{Certificates: []tls.Certificate{load(client)},
		RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	b, _ := io.ReadAll(conn)
	conn.Close()
	if string(b) != "hello" {
		t.Fatalf("read %q", b)
	}
	// The server's certificate names its hosts.
	cert, _ := x509.ParseCertificate(load(server).Certificate[0])
	if err := cert.VerifyHostname("master-1.example"); err != nil {
		t.Error(err)
	}
}

// TestNothingOverwritten: making a CA or certificate where one exists is
// refused, naming the file, and leaves it as it was.
func TestNothingOverwritten(t *testing.T) {
	dir := t.TempDir()
	if err := CreateCA(dir, "test CA", time.Hour); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err := CreateCA(dir, "test CA", time.Hour); err == nil || !strings.Contains(err.Error(), CAFile) {
		t.Fatalf("a second CA: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, CAKeyFile)); string(after) != string(before) {
		t.Fatal("the CA key changed")
	}
	if _, err := CreateCert(dir, dir, "n1", []string{"localhost"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := CreateCert(dir, dir, "n1", []string{"localhost"}, time.Hour); err == nil || !strings.Contains(err.Error(), "n1.pem") {
		t.Fatalf("a second n1: %v", err)
	}
	for _, name := range []string{"", "../x", "."} {
		if _, err := CreateCert(dir, dir, name, nil, time.Hour); err == nil {
			t.Errorf("certificate name %q accepted", name)
		}
	}
	if _, err := CreateCert(t.TempDir(), dir, "n2", nil, time.Hour); err == nil || !strings.Contains(err.Error(), CAFile) {
		t.Fatalf("no CA: %v", err)
	}
}
