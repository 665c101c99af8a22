package main

import (
	"context"
	"strings"
	"testing"
)

// TestSubmitToSessionRefusesJobFlags: a run in a session takes the
// session's ranks, input and environment; a job flag given with --session
// is refused (exit 2) before anything runs, naming the flag.
func TestSubmitToSessionRefusesJobFlags(t *testing.T) {
	t.Setenv("SPINDLE_CONF_DIR", "")
	err := newApp().RunContext(context.Background(), []string{"spindle", "submit", "--session", "s1", "--num-executors", "3", "--", "python3", "x.py"})
	if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), "--num-executors belongs to the session") {
		t.Fatalf("exit %d: %v", exitCode(err), err)
	}
}
