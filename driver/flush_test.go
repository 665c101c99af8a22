package driver

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// TestFlushTimeoutFromConfig: the bound on finishing the job's records is
// the configuration's, 30s by default.
func TestFlushTimeoutFromConfig(t *testing.T) {
	if DefaultFlushTimeout != 30*time.Second {
		t.Fatalf("DefaultFlushTimeout %v, want 30s", DefaultFlushTimeout)
	}
	d := &Driver{cfg: Config{FlushTimeout: 5 * time.Second}, logger: slog.New(slog.DiscardHandler)}
	o := d.startObserver(context.Background())
	defer o.end(nil)
	if o.flush != 5*time.Second {
		t.Fatalf("the observer's flush bound %v, want the configured 5s", o.flush)
	}
}
