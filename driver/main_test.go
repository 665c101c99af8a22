package driver

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the driver starts is owned and waited for.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
