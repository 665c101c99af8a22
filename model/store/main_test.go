package store

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks the package's tests leak no goroutines: every HDFS
// client and file they open is closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
