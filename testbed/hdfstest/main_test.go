package hdfstest

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no goroutine outlives the tests. colinmarc/hdfs
// v2.4.0 leaks one ack reader per block write that failed (its stream
// never closes the packet queue after an ack error); that one is known.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/colinmarc/hdfs/v2/internal/transfer.(*blockWriteStream).ackPackets"))
}
