package krbtest

import (
	"os/exec"
	"strings"
	"testing"
)

// TestKDC: the KDC issues a ticket that MIT's own klist shows.
func TestKDC(t *testing.T) {
	k := Start(t)
	kt := k.AddPrincipal("alice")
	cc := k.Kinit("alice", kt)
	cmd := exec.Command("klist", "-c", "FILE:"+cc)
	cmd.Env = k.Env()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "alice@"+Realm) || !strings.Contains(string(out), "krbtgt/"+Realm) {
		t.Fatalf("klist: %v\n%s", err, out)
	}
}
