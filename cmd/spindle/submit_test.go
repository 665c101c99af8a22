package main

import (
	"context"
	"strings"
	"testing"
)

// TestDeployModeClusterNeedsYARN: the driver can run in the cluster only
// where there is an ApplicationMaster to run it in.
func TestDeployModeClusterNeedsYARN(t *testing.T) {
	t.Setenv("SPINDLE_CONF_DIR", "")
	for _, master := range []string{"local[2]", "spindle://127.0.0.1:1"} {
		err := newApp().RunContext(context.Background(), []string{"spindle", "submit", "--master", master, "--deploy-mode", "cluster", "--", "true"})
		if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), "--deploy-mode cluster") || !strings.Contains(err.Error(), "needs --master yarn") {
			t.Errorf("master %s: exit %d: %v", master, exitCode(err), err)
		}
	}
}
