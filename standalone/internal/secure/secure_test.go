package secure

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/internal/auth"
)

func TestResolveSecret(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good", "  file-secret-0123456789\n", 0o600)
	open := file("open", "file-secret-0123456789", 0o640)
	env := func(v string) func(string) string { return func(string) string { return v } }
	tests := []struct {
		name    string
		src     SecretSources
		want    string
		wantErr error
		text    string
	}{
		{"file first", SecretSources{File: good, Value: "value-secret-0123456789", Env: env("env-secret-0123456789")}, "file-secret-0123456789", nil, ""},
		{"value next", SecretSources{Value: "value-secret-0123456789", Env: env("env-secret-0123456789")}, "value-secret-0123456789", nil, ""},
		{"env last", SecretSources{Env: env(" env-secret-0123456789 ")}, "env-secret-0123456789", nil, ""},
		{"none", SecretSources{Env: env("")}, "", ErrNoSecret, "SPINDLE_CLUSTER_SECRET"},
		{"weak", SecretSources{Value: "short"}, "", auth.ErrWeakSecret, "spindle.cluster.secret"},
		{"group readable file", SecretSources{File: open}, "", nil, "chmod 600"},
		{"missing file", SecretSources{File: filepath.Join(dir, "nope")}, "", os.ErrNotExist, "nope"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveSecret(tc.src)
			if tc.want != "" {
				if err != nil || got != tc.want {
					t.Fatalf("got %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if err == nil || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("got %v; want an error wrapping %v saying %q", err, tc.wantErr, tc.text)
			}
		})
	}
}

func TestPartialTLSRefused(t *testing.T) {
	_, err := New("a-secret-long-enough-0123", TLSFiles{CertFile: "c.pem"})
	if err == nil || !strings.Contains(err.Error(), "needs spindle.cluster.tls.certFile, keyFile and caFile") {
		t.Fatalf("partial TLS: %v", err)
	}
	c, err := New("a-secret-long-enough-0123", TLSFiles{})
	if err != nil || c.ServerTLS() != nil || c.ClientTLS("h") != nil || len(c.DialOptions()) != 4 {
		t.Fatalf("no TLS: %v", err)
	}
}
