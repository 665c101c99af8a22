package driver

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestProducerFilesCAFirst: a token file, which producers wait for, never
// appears before its CA file is whole; when the CA file cannot be
// written no token file appears, and when the token cannot be written no
// CA file is left.
func TestProducerFilesCAFirst(t *testing.T) {
	pem := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	t.Run("both", func(t *testing.T) {
		dir := t.TempDir()
		token, ca := filepath.Join(dir, "p.token"), filepath.Join(dir, "p.ca.pem")
		if err := writeProducerFiles(token, "secret", ca, pem); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(ca); err != nil || string(b) != string(pem) {
			t.Errorf("CA file %q, %v", b, err)
		}
		if b, err := os.ReadFile(token); err != nil || string(b) != "secret\n" {
			t.Errorf("token file %q, %v", b, err)
		}
	})
	t.Run("CA file taken", func(t *testing.T) {
		dir := t.TempDir()
		token, ca := filepath.Join(dir, "p.token"), filepath.Join(dir, "p.ca.pem")
		if err := os.WriteFile(ca, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := writeProducerFiles(token, "secret", ca, pem); err == nil {
			t.Fatal("wrote the files over an existing CA file")
		}
		if _, err := os.Stat(token); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a token file without its CA file: %v", err)
		}
	})
	t.Run("token file taken", func(t *testing.T) {
		dir := t.TempDir()
		token, ca := filepath.Join(dir, "p.token"), filepath.Join(dir, "p.ca.pem")
		if err := os.WriteFile(token, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := writeProducerFiles(token, "secret", ca, pem); err == nil {
			t.Fatal("wrote the files over an existing token file")
		}
		if _, err := os.Stat(ca); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a CA file left without its token: %v", err)
		}
	})
}
