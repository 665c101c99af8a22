package convert

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks the package's tests leak no goroutines.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
