package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestJobUIToken: with spindle.ui.token the driver's UI, on the address
// spindle.ui.bindHost names, answers only requests with the token that
// the submit console printed.
func TestJobUIToken(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "go")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(3*time.Minute))
	defer cancel()
	line := regexp.MustCompile(`job (\S+): web UI at (http://127\.0\.0\.1:\d+/)\?token=([0-9a-f]+)`)
	cmd, m := startSpindle(t, ctx, t.TempDir(), line, submitArgs("--num-executors", "1",
		"--conf", "spindle.ui.port=0", "--conf", "spindle.ui.token=true", "--conf", "spindle.ui.bindHost=127.0.0.1",
		"--", "/bin/sh", "-c", "while [ ! -e "+gate+" ]; do sleep 0.1; done")...)
	jobID, ui, token := m[1], m[2], m[3]
	get := func(auth string) int {
		req, _ := http.NewRequestWithContext(ctx, "GET", ui+"api/jobs/"+jobID, nil)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(""); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d, want 401", code)
	}
	if code := get(token); code != http.StatusOK {
		t.Errorf("with the printed token: %d, want 200", code)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}
}
