package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/internal/envcontract"
	"github.com/spindle-ml/spindle/internal/secretfd"
)

// TestExecutorBadTLSBundle: an executor given a TLS bundle it cannot use
// (through the secrets pipe) exits 2 before doing anything, naming the
// bundle and not its value, and leaves no secret in its environment.
func TestExecutorBadTLSBundle(t *testing.T) {
	for _, tc := range []struct {
		name, bundle string
	}{
		{"not PEM", "not-a-bundle-value"},
		{"certificate only", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Variables of the secrets' names are dropped, never used.
			t.Setenv(envcontract.JobSecret, "from-the-environment")
			t.Setenv(envcontract.JobTLS, "from-the-environment")
			entry, err := secretfd.Inheritable(map[string]string{
				envcontract.JobSecret: "0123456789abcdef0123456789abcdef", envcontract.JobTLS: tc.bundle})
			if err != nil {
				t.Fatal(err)
			}
			k, v, _ := strings.Cut(entry, "=")
			t.Setenv(k, v)
			err = newApp().RunContext(context.Background(), []string{"spindle", "executor", "--driver", "127.0.0.1:1", "--id", "exec-0"})
			if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), envcontract.JobTLS) {
				t.Fatalf("exit %d: %v; want exit 2 naming %s", exitCode(err), err, envcontract.JobTLS)
			}
			if strings.Contains(err.Error(), tc.bundle) {
				t.Errorf("the error quotes the bundle: %v", err)
			}
			for _, k := range []string{envcontract.JobSecret, envcontract.JobTLS, secretfd.Env} {
				if _, ok := os.LookupEnv(k); ok {
					t.Errorf("%s is still in the executor's environment", k)
				}
			}
		})
	}
}
