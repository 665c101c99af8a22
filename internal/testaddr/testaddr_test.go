package testaddr

import (
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestFreeIsBindableAndBelowEphemeral(t *testing.T) {
	seen := map[string]bool{}
	for range 20 {
		addr := Free(t)
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
		_, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		if lo := ephemeralLow(); lo-lowestPort >= 1000 && (port < lowestPort || port >= lo) {
			t.Fatalf("port %d outside [%d, %d)", port, lowestPort, lo)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("bind %s: %v", addr, err)
		}
		l.Close()
	}
}

// A port another holder claimed is not handed out again, even though
// nothing listens on it.
func TestClaimIsExclusive(t *testing.T) {
	path := t.TempDir() + "/port"
	unlock, ok := claim(path)
	if !ok {
		t.Fatal("first claim refused")
	}
	if _, ok := claim(path); ok {
		t.Fatal("second claim granted while the first holds")
	}
	unlock()
	unlock2, ok := claim(path)
	if !ok {
		t.Fatal("claim refused after release")
	}
	unlock2()
}

func TestRefusing(t *testing.T) {
	addr := Refusing(t)
	_, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("%s could be bound while held", addr)
	}
}
