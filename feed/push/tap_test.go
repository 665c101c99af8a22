package push

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// countingListener counts the bytes the server reads from its
// connections.
type countingListener struct {
	net.Listener
	read atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, read: &l.read}, nil
}

type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read.Add(int64(n))
	return n, err
}

// TestPushRefusesUnauthenticatedUnread: a GetFlightInfo of 16 MiB without
// a token is refused on its headers: the endpoint reads a small part of
// it at most (what HTTP/2 flow control lets the client send ahead), not
// the message. With the token, the same call is read and answered.
func TestPushRefusesUnauthenticatedUnread(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	s, err := Start(cl, Config{Ranks: 1, BatchRows: 10, Schema: flightSchema,
		ProducerToken: testProducerToken, FeedToken: testFeedToken, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, c := dialPush(t, s.Addr())
	big := &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: bytes.Repeat([]byte{'x'}, 16<<20)}
	const limit = 1 << 20

	for _, token := range []string{"", "guess", testFeedToken} {
		before := cl.read.Load()
		_, err := c.GetFlightInfo(bearer(ctx, token), big, grpc.MaxCallSendMsgSize(32<<20))
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("token %q: %v, want Unauthenticated", token, err)
		}
		if n := cl.read.Load() - before; n > limit {
			t.Fatalf("token %q: the endpoint read %d bytes of a refused call, want at most %d", token, n, limit)
		}
	}
	if n := s.tapRefused.Load(); n != 3 {
		t.Fatalf("%d calls refused on their headers, want 3", n)
	}
	before := cl.read.Load()
	if _, err := c.GetFlightInfo(bearer(ctx, testProducerToken), big, grpc.MaxCallSendMsgSize(32<<20), grpc.MaxCallRecvMsgSize(32<<20)); err != nil {
		t.Fatalf("with the token: %v", err)
	}
	if n := cl.read.Load() - before; n < 16<<20 {
		t.Fatalf("with the token the endpoint read %d bytes, want the whole message", n)
	}
}
