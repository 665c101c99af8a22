package scaletest

import (
	"testing"

	"go.uber.org/goleak"
)

// The test binary is also the swarm its managers start; every goroutine
// the harness and the driver start is owned and waited for.
func TestMain(m *testing.M) {
	MaybeSwarm()
	goleak.VerifyTestMain(m)
}
