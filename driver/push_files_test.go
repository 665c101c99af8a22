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
	// A file already there stops the write; the other must not be left.
	for _, tc := range []struct{ taken, left string }{{"p.ca.pem", "p.token"}, {"p.token", "p.ca.pem"}} {
		t.Run(tc.taken+" taken", func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, tc.taken), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := writeProducerFiles(filepath.Join(dir, "p.token"), "secret", filepath.Join(dir, "p.ca.pem"), pem); err == nil {
				t.Fatalf("wrote the files over an existing %s", tc.taken)
			}
			if _, err := os.Stat(filepath.Join(dir, tc.left)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s left when %s could not be written: %v", tc.left, tc.taken, err)
			}
		})
	}
}
