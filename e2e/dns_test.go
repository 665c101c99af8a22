package e2e

import (
	"strings"
	"testing"
)

// TestUnknownNamenodeHost: an --input on a namenode whose name does not
// resolve is bad input: exit 2 with a line naming the host, not exit 1
// after retrying an unreachable namenode.
func TestUnknownNamenodeHost(t *testing.T) {
	const host = "no-such-namenode.invalid" // RFC 6761: never resolves
	r := spindle(t, t.TempDir(), submitArgs("--master", "local[1]", "--input", "hdfs://"+host+":8020/data/*.parquet",
		"--", "true")...)
	if r.code != 2 || !strings.Contains(r.stderr, host) || !strings.Contains(r.stderr, "no such host") {
		t.Fatalf("exit %d, want 2 naming %s as no such host:\n%s", r.code, host, r)
	}
}
