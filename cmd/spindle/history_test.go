package main

import (
	"context"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestHistoryToken: spindle history --token answers only requests that
// carry the token it printed.
func TestHistoryToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	var out syncbuf.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &out
	done := make(chan error, 1)
	go func() {
		done <- app.RunContext(ctx, []string{"spindle", "history", "--dir", t.TempDir(), "--address", "127.0.0.1:0", "--token", "--log-level", "warn"})
	}()
	line := regexp.MustCompile(`history server for \S+ at (http://127\.0\.0\.1:\d+/)\?token=([0-9a-f]+)`)
	var m []string
	for m == nil {
		select {
		case err := <-done:
			t.Fatalf("history ended: %v\n%s", err, out.String())
		case <-ctx.Done():
			t.Fatalf("no address with a token printed:\n%s", out.String())
		case <-time.After(10 * time.Millisecond):
			m = line.FindStringSubmatch(out.String())
		}
	}
	get := func(token string) int {
		req, _ := http.NewRequestWithContext(ctx, "GET", m[1]+"api/jobs", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
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
	if code := get(m[2]); code != http.StatusOK {
		t.Errorf("with the token: %d, want 200", code)
	}
	cancel()
	<-done
}
