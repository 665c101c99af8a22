package testutil

import (
	"sync"
	"testing"
)

// LogWriter returns an io.Writer that writes to t's log until the test's
// cleanups reach it, then drops what it is given. Libraries whose
// goroutines outlive their Shutdown (Raft's network transport, a child
// process's output copier) would otherwise log after the test completed,
// which panics the test binary ("Log in goroutine after ... has
// completed"). A write under way when the cleanup runs finishes first.
func LogWriter(t testing.TB) *TestLogWriter {
	w := &TestLogWriter{t: t}
	t.Cleanup(w.end)
	return w
}

// TestLogWriter is LogWriter's writer.
type TestLogWriter struct {
	t     testing.TB
	mu    sync.Mutex
	ended bool
}

func (w *TestLogWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended {
		w.t.Logf("%s", b)
	}
	return len(b), nil
}

func (w *TestLogWriter) end() {
	w.mu.Lock()
	w.ended = true
	w.mu.Unlock()
}
