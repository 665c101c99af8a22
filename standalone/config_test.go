package standalone_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/config"
	"github.com/spindle-ml/spindle/standalone"
)

func TestClientConfigFromProperties(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "secret")
	if err := os.WriteFile(good, []byte("file-secret-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, "open")
	if err := os.WriteFile(open, []byte("file-secret-0123456789abcdef\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	props := filepath.Join(dir, "job.conf")
	if err := os.WriteFile(props, []byte("spindle.cluster.secret from-a-properties-file-0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		env     string
		src     config.Sources
		want    string
		wantErr string
	}{
		{"file", "", config.Sources{Overrides: []string{"spindle.cluster.secretFile=" + good}}, "file-secret-0123456789abcdef", ""},
		{"file beats env", "env-secret-0123456789abcdef", config.Sources{Overrides: []string{"spindle.cluster.secretFile=" + good}}, "file-secret-0123456789abcdef", ""},
		{"env", "env-secret-0123456789abcdef", config.Sources{}, "env-secret-0123456789abcdef", ""},
		{"properties file", "", config.Sources{PropertiesFile: props}, "from-a-properties-file-0123", ""},
		{"world-readable file", "", config.Sources{Overrides: []string{"spindle.cluster.secretFile=" + open}}, "", "readable by group or others (mode 0644): run chmod 600"},
		{"on the command line", "", config.Sources{Overrides: []string{"spindle.cluster.secret=command-line-secret-0123"}}, "", "shows in process listings"},
		{"none", "", config.Sources{}, "", "no cluster secret configured"},
		{"too short", "short", config.Sources{}, "", "secret shorter than 16 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SPINDLE_CLUSTER_SECRET", tc.env)
			p, _, err := config.Load(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := standalone.ClientConfigFromProperties(p, []string{"m1:7077"})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Secret != tc.want || cfg.GangTimeout != 120*time.Second || cfg.Masters[0] != "m1:7077" {
				t.Fatalf("config: %+v", cfg)
			}
		})
	}
	t.Setenv("SPINDLE_CLUSTER_SECRET", "")
	p, _, _ := config.Load(config.Sources{Overrides: []string{"spindle.cluster.secret=command-line-secret-0123"}})
	if _, err := standalone.SecretFromProperties(p); !errors.Is(err, standalone.ErrSecretOnCommandLine) {
		t.Fatalf("secret from --conf: %v", err)
	}
}
