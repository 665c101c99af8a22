package testcluster

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/tlsgen"
	"github.com/spindle-ml/spindle/standalone/internal/secure"
)

// WriteTLSFiles writes a fresh CA and a certificate it signed for
// 127.0.0.1 and localhost (usable by servers and clients), as spindle tls
// makes them, and returns their files.
func WriteTLSFiles(t testing.TB) secure.TLSFiles {
	t.Helper()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca")
	if err := tlsgen.CreateCA(ca, "spindle test CA", 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	f, err := tlsgen.CreateCert(ca, filepath.Join(dir, "node"), "node", []string{"127.0.0.1", "localhost"}, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return secure.TLSFiles{CertFile: f.Cert, KeyFile: f.Key, CAFile: f.CA}
}
