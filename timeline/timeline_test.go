package timeline

import (
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/envcontract"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// reset forgets the recorder, so a test can set the environment anew.
func reset() {
	once = sync.Once{}
	rec = nil
}

// recordTo starts a recorder that sends to a report socket of its own, as
// an executor's, and returns that socket.
func recordTo(t *testing.T) *net.UnixConn {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "report.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv(envcontract.Timeline, "1")
	t.Setenv(envcontract.ReportSocket, sock)
	reset()
	t.Cleanup(reset)
	return conn
}

func TestDisabled(t *testing.T) {
	t.Setenv(envcontract.Timeline, "")
	t.Setenv(envcontract.ReportSocket, filepath.Join(t.TempDir(), "report.sock"))
	reset()
	defer reset()
	if Enabled() {
		t.Fatal("recording without SPINDLE_TIMELINE=1")
	}
	Start(CatFeed, "next batch")() // does nothing, and does not fail
	Flush()
}

// TestSpansReachTheSocket: spans arrive in datagrams, sent by Flush or by
// the timer when no more spans come (200 ms after the first: on a loaded
// machine it may send the first span before the second is recorded).
func TestSpansReachTheSocket(t *testing.T) {
	conn := recordTo(t)
	if !Enabled() {
		t.Fatal("not recording with SPINDLE_TIMELINE=1")
	}
	read := func() []Span {
		t.Helper()
		_ = conn.SetReadDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
		buf := make([]byte, 1<<16)
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		var msg struct{ Spans []Span }
		if err := json.Unmarshal(buf[:n], &msg); err != nil {
			t.Fatal(err)
		}
		return msg.Spans
	}

	end := Start(CatCollective, "allreduce")
	time.Sleep(2 * time.Millisecond)
	end()
	Start(CatCheckpoint, "save model")()
	Flush()
	spans := read()
	if len(spans) == 1 {
		spans = append(spans, read()...)
	}
	if len(spans) != 2 || spans[0].Name != "allreduce" || spans[0].Cat != CatCollective || spans[0].Dur < 2000 ||
		spans[0].TS <= 0 || spans[1].Cat != CatCheckpoint {
		t.Fatalf("spans %+v", spans)
	}

	Start(CatFeed, "next batch")()
	if spans := read(); len(spans) != 1 || spans[0].Cat != CatFeed {
		t.Fatalf("the timer sent %+v", spans)
	}
}

// TestFullQueueKeepsSpans: spans the executor's queue has no room for wait
// for a later send, and Flush delivers every one of them, in order.
func TestFullQueueKeepsSpans(t *testing.T) {
	conn := recordTo(t)

	const n = 5000
	for i := 0; i < n; i++ {
		Start(CatFeed, fmt.Sprintf("wait %d", i))()
	}
	rec.mu.Lock()
	waiting := len(rec.pending)
	rec.mu.Unlock()
	if waiting == 0 {
		t.Fatal("the queue never filled: the test shows nothing")
	}

	var got []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1<<20)
		for len(got) < n {
			_ = conn.SetReadDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
			m, err := conn.Read(buf)
			if err != nil {
				return
			}
			var msg struct{ Spans []Span }
			if err := json.Unmarshal(buf[:m], &msg); err != nil {
				return
			}
			for _, s := range msg.Spans {
				got = append(got, s.Name)
			}
		}
	}()
	Flush()
	<-done
	if len(got) != n {
		t.Fatalf("%d spans reached the socket, want %d", len(got), n)
	}
	for i, name := range got {
		if name != fmt.Sprintf("wait %d", i) {
			t.Fatalf("span %d is %q: out of order or lost", i, name)
		}
	}
}
