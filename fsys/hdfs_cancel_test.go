package fsys

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// hungNamenode accepts connections and never answers, as a namenode stuck
// in a long GC pause or behind a dead proxy does.
func hungNamenode(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// A call blocked on a namenode that never answers returns as soon as its
// context ends (Ctrl-C on submit during planning), not never.
func TestHDFSCallsEndWithTheirContext(t *testing.T) {
	addr := hungNamenode(t)
	t.Setenv("HADOOP_CONF_DIR", "")
	res := NewResolver(Options{User: "tester"})
	defer res.Close()
	ctx, cancel := context.WithCancel(context.Background())
	timer := time.AfterFunc(300*time.Millisecond, cancel)
	defer timer.Stop()
	done := make(chan error, 1)
	go func() {
		_, _, err := res.Resolve(ctx, "hdfs://"+addr+"/data")
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(testutil.Scale(20 * time.Second)):
		t.Fatal("Resolve against a hung namenode did not end with its context")
	}
}
