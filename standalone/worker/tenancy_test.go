package worker_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/standalone/worker"
)

// TestSingleTenantWarning: a worker says at start-up that every job runs
// as its user, as docs/standalone.md does.
func TestSingleTenantWarning(t *testing.T) {
	var buf bytes.Buffer
	c := worker.DefaultConfig()
	c.ID, c.Masters, c.Secret = "w1", []string{"127.0.0.1:1"}, "0123456789abcdef0123456789abcdef"
	c.Addr, c.Binary, c.WorkDir = "127.0.0.1:0", "/bin/sh", t.TempDir()
	c.Cores, c.MemoryMB = 1, 64
	c.DisableCgroups = true
	c.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	w, err := worker.New(c)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if !strings.Contains(buf.String(), "level=WARN msg=\"single-tenant worker") {
		t.Fatalf("no single-tenant warning at start-up:\n%s", buf.String())
	}
}
