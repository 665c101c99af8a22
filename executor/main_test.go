package executor

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the executor starts is owned and waited for.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
