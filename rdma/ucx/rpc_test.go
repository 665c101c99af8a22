package ucx

import (
	"bytes"
	"context"
	"errors"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// echo replies with the head reversed and the body doubled, byte by byte.
func echo(r *Request) {
	head := make([]byte, len(r.Head))
	for i, b := range r.Head {
		head[len(head)-1-i] = b
	}
	out := r.Buffer(len(r.Body))
	for i, b := range r.Body {
		out[i] = 2 * b
	}
	r.Reply(head, out)
}

func rpcPair(t *testing.T, handle func(*Request)) (*Listener, *Dialer, *Conn, *Session) {
	t.Helper()
	if ok, why := Available(); !ok {
		t.Skipf("UCX requests not tested: %s", why)
	}
	l, err := Listen(quietLogger(), handle)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	d, err := NewDialer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	s, err := l.Accept(d.Address())
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Connect(l.Address(), s.Grant())
	if err != nil {
		t.Fatal(err)
	}
	return l, d, c, s
}

// Requests of every size come back as the handler made them, the payload
// in place when its size is the one asked for.
func TestRequestReply(t *testing.T) {
	l, _, c, _ := rpcPair(t, echo)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(20*time.Second))
	defer cancel()
	for _, tc := range []struct {
		name    string
		head    int
		body    []int
		inPlace bool
	}{
		{"empty", 0, nil, false},
		{"small", 5, []int{3, 9}, true},
		{"head only", 100, nil, false},
		{"large", 17, []int{1 << 20, 3 << 20}, true},
		{"other size", 8, []int{64}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			head := bytes.Repeat([]byte{'h'}, tc.head)
			if tc.head > 0 {
				head[0] = 'a'
			}
			var body [][]byte
			total := 0
			for i, n := range tc.body {
				b := bytes.Repeat([]byte{byte(i + 1)}, n)
				body = append(body, b)
				total += n
			}
			var into []byte
			if tc.inPlace {
				into = make([]byte, total)
			} else if total > 0 {
				into = make([]byte, total+1)
			}
			r, err := c.Call(ctx, head, body, into)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Release()
			if r.InPlace != tc.inPlace || len(r.Head) != tc.head || len(r.Payload) != total {
				t.Fatalf("reply: in place %v, head %d bytes, payload %d; want %v, %d, %d", r.InPlace, len(r.Head), len(r.Payload), tc.inPlace, tc.head, total)
			}
			if tc.head > 0 && r.Head[len(r.Head)-1] != 'a' {
				t.Fatalf("head %q not reversed", r.Head)
			}
			off := 0
			for i, n := range tc.body {
				for j := range n {
					if r.Payload[off+j] != byte(2*(i+1)) {
						t.Fatalf("payload byte %d is %d, want %d", off+j, r.Payload[off+j], 2*(i+1))
					}
				}
				off += n
			}
		})
	}
	if l.Served() != 5 || l.Refused() != 0 {
		t.Fatalf("served %d, refused %d: want 5 and 0", l.Served(), l.Refused())
	}
}

// A caller that reaches the worker without the session's grant (a wrong
// key, an unknown session) is served nothing and gets nothing back.
func TestForgedGrantRefused(t *testing.T) {
	served := make(chan struct{}, 10)
	l, d, _, s := rpcPair(t, func(r *Request) { served <- struct{}{}; echo(r) })
	for _, tc := range []struct {
		name  string
		grant Grant
	}{
		{"wrong key", Grant{ID: s.Grant().ID, Key: [16]byte{1}}},
		{"unknown session", Grant{ID: s.Grant().ID + 1, Key: s.Grant().Key}},
		{"no session", Grant{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := l.Refused()
			rogue, err := d.Connect(l.Address(), tc.grant)
			if err != nil {
				t.Fatal(err)
			}
			defer rogue.Close()
			// The call stays open until the listener has refused it: a
			// call given up early (it once had 300 ms) cancels its send,
			// which a loaded machine had not delivered yet, and nothing
			// was there to refuse.
			ctx, cancel := context.WithCancel(context.Background())
			answered := make(chan error, 1)
			go func() {
				_, err := rogue.Call(ctx, []byte("x"), [][]byte{[]byte("payload")}, nil)
				answered <- err
			}()
			err = testutil.Poll(10*time.Second, testutil.Holds("refusal", func() bool { return l.Refused() > before }))
			cancel()
			if got := <-answered; !errors.Is(got, context.Canceled) {
				t.Fatalf("a forged call: %v, want no answer", got)
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.Refused() != before+1 {
				t.Fatalf("refused %d requests, want %d", l.Refused(), before+1)
			}
		})
	}
	if len(served) != 0 {
		t.Fatalf("the handler served %d forged requests", len(served))
	}
}

// A call waiting on a session its caller learns is lost fails at once,
// wrapping ErrLost; a closed session's calls fail too.
func TestLostSessionFailsCall(t *testing.T) {
	release := make(chan struct{})
	_, _, c, _ := rpcPair(t, func(r *Request) { <-release; r.Reply(nil, nil) })
	defer close(release)
	done := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), []byte("wait"), nil, nil)
		done <- err
	}()
	c.Lose(errors.New("the server's stream closed"))
	select {
	case err := <-done:
		if !errors.Is(err, ErrLost) {
			t.Fatalf("got %v, want ErrLost", err)
		}
	case <-time.After(testutil.Scale(5 * time.Second)):
		t.Fatal("the call did not fail once the session was lost")
	}
	c.Close()
	if _, err := c.Call(context.Background(), nil, nil, nil); !errors.Is(err, ErrLost) {
		t.Fatalf("a call on a closed session: %v", err)
	}
}

// Calls from several goroutines at once, with bodies and payloads in Go
// memory that the collector frees between calls (collecting often): the
// link must leave no stale pointer behind for the collector to find, and
// every reply must be its own call's.
func TestConcurrentCallsUnderGC(t *testing.T) {
	_, _, c, _ := rpcPair(t, echo)
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(60*time.Second))
	defer cancel()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 100 {
				n := (i*7919+g*131)%(1<<20) + 2
				a, b := bytes.Repeat([]byte{byte(g + 1)}, n/2), bytes.Repeat([]byte{byte(i%50 + 1)}, n-n/2)
				var into []byte
				if i%2 == 0 {
					into = make([]byte, n)
				}
				r, err := c.Call(ctx, []byte{byte(g), byte(i)}, [][]byte{a, b}, into)
				if err != nil {
					t.Error(err)
					return
				}
				ok := len(r.Payload) == n && r.Payload[0] == byte(2*(g+1)) && r.Payload[n-1] == byte(2*(i%50+1)) &&
					len(r.Head) == 2 && r.Head[0] == byte(i) && r.Head[1] == byte(g) && r.InPlace == (into != nil)
				r.Release()
				if !ok {
					t.Errorf("goroutine %d call %d: a reply that is not its own", g, i)
					return
				}
			}
		})
	}
	wg.Wait()
}
