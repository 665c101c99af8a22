package standalone

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestSecretsRefusedOverPlainText: a submit to masters on another host
// without cluster TLS is refused before anything is sent, naming the
// masters and the keys, as is one handing delegation tokens to remote
// executors without job TLS; allowed, it warns; loopback masters need
// neither.
func TestSecretsRefusedOverPlainText(t *testing.T) {
	cfg := DefaultClientConfig()
	cfg.Masters = []string{"127.0.0.1:7077", "192.0.2.1:7077"}
	cfg.Secret = "0123456789abcdef0123456789abcdef"
	_, err := NewClusterManager(context.Background(), cfg)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "192.0.2.1:7077") ||
		!strings.Contains(err.Error(), "spindle.cluster.plaintextSecrets") || strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("err = %v, want a configuration error naming the remote master and the key", err)
	}

	for _, tc := range []struct {
		name     string
		masters  []string
		allowed  bool
		warnings int
	}{
		{"allowed", []string{"192.0.2.1:7077"}, true, 1},
		{"loopback", []string{"127.0.0.1:7077", "localhost:7078", "[::1]:7079"}, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			c := cfg
			c.Masters, c.PlaintextSecrets = tc.masters, tc.allowed
			if err := checkSecretsChannel(c, slog.New(slog.NewTextHandler(&buf, nil))); err != nil {
				t.Fatal(err)
			}
			if got := strings.Count(buf.String(), "level=WARN"); got != tc.warnings || (tc.warnings > 0 && !strings.Contains(buf.String(), "plain text")) {
				t.Fatalf("%d warnings, want %d:\n%s", got, tc.warnings, buf.String())
			}
		})
	}
	c := cfg
	c.CertFile, c.KeyFile, c.CAFile = "c.pem", "k.pem", "ca.pem"
	if err := checkSecretsChannel(c, slog.Default()); err != nil {
		t.Fatalf("with cluster TLS: %v", err)
	}
	// Delegation tokens reach remote executors over the job's own link.
	c.RenewTokens = true
	if err := checkSecretsChannel(c, slog.Default()); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "spindle.job.tls.enabled") {
		t.Fatalf("tokens without job TLS: %v, want a refusal naming spindle.job.tls.enabled", err)
	}
	c.JobTLS = true
	if err := checkSecretsChannel(c, slog.Default()); err != nil {
		t.Fatalf("tokens with job TLS: %v", err)
	}
}
