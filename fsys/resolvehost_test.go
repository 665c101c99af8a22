package fsys

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
)

// TestUnknownNamenodeHost: a namenode host the DNS does not know is a
// configuration error at the first attempt, not a namenode to retry.
func TestUnknownNamenodeHost(t *testing.T) {
	const host = "no-such-namenode.invalid" // RFC 6761: never resolves
	var de *net.DNSError
	if _, err := net.DefaultResolver.LookupHost(context.Background(), host); !errors.As(err, &de) || !de.IsNotFound {
		t.Skipf("this host's DNS does not answer 'no such host' for %s: %v", host, err)
	}
	r := NewResolver(Options{User: "alice"})
	defer r.Close()
	_, _, err := r.Resolve(context.Background(), "hdfs://"+host+":8020/data")
	if !errors.Is(err, ErrHadoopConfig) || errors.Is(err, ErrNamenodeUnreachable) || !strings.Contains(err.Error(), host) {
		t.Fatalf("err = %v, want ErrHadoopConfig naming %s", err, host)
	}
}
