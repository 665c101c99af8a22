package master

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestRaftHandshakeBoundFromConfig: the defaults of the bounds Config
// gained are the values they had as constants, and the Raft stream layer
// drops a connection that does not authenticate within its configured
// bound.
func TestRaftHandshakeBoundFromConfig(t *testing.T) {
	d := DefaultConfig()
	if d.ProbeTimeout != 2*time.Second || d.RaftHandshakeTimeout != 5*time.Second || d.RaftIOTimeout != 10*time.Second {
		t.Fatalf("defaults: probe %v, raft handshake %v, raft I/O %v", d.ProbeTimeout, d.RaftHandshakeTimeout, d.RaftIOTimeout)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := newStreamLayer(ln, ln.Addr().String(), []byte(testSecret), nil, nil, 20*time.Millisecond, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The layer gives up on the silent connection after its 20ms; the
	// read's own deadline, far longer, only ends the test if it does not.
	_ = c.SetReadDeadline(time.Now().Add(testutil.Scale(4 * time.Second)))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a connection that sent no hello: read %v, want EOF (closed by the layer)", err)
	}
}
