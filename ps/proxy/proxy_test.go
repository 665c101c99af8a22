package proxy

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/client"
	"github.com/spindle-ml/spindle/ps/internal/pstest"
)

// Every goroutine a proxy starts is owned and waited for.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const token = "0123456789abcdef0123456789abcdef"

func quiet() *slog.Logger { return pstest.Quiet() }

// cluster is real parameter servers on loopback (ps/internal/pstest),
// behind the peer-token handshake, for workers workers.
type cluster struct{ *pstest.Cluster }

func startCluster(t testing.TB, servers, workers int, staleness ps.Staleness) *cluster {
	t.Helper()
	return &cluster{pstest.Start(t, pstest.Options{Servers: servers, Workers: workers, Token: token, Staleness: staleness,
		WaitTimeout: 20 * time.Second})}
}

// goClient is a Go client of the cluster, to look at the servers from
// outside the proxy.
func (c *cluster) goClient(t testing.TB, worker int) *client.Client {
	t.Helper()
	cl, err := client.New(client.Config{Servers: c.Addrs, Token: token, Worker: worker, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Abandon)
	return cl
}

// startProxy runs a proxy for worker of c on a socket in a fresh
// directory until the test ends.
func startProxy(t testing.TB, c *cluster, worker int, tok string) *Proxy {
	t.Helper()
	dir, err := os.MkdirTemp("", "psp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p, err := New(Config{Path: filepath.Join(dir, "ps.sock"), Logger: quiet(), Connect: func() (*client.Client, error) {
		return client.New(client.Config{Servers: c.Addrs, Token: tok, Worker: worker, Logger: quiet()})
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxy run: %v", err)
		}
		p.Close()
	})
	return p
}

// conn is the test's end of the protocol, written from docs/ps-python.md.
type conn struct {
	t testing.TB
	c net.Conn
}

func dial(t testing.TB, p *Proxy) *conn {
	t.Helper()
	c, err := net.Dial("unix", p.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &conn{t: t, c: c}
}

// call sends one request and returns the reply's body, or its error
// message as err.
func (c *conn) call(op byte, body ...[]byte) (reply []byte, errMsg string) {
	c.t.Helper()
	n := 1
	for _, b := range body {
		n += len(b)
	}
	frame := binary.LittleEndian.AppendUint32(nil, uint32(n))
	frame = append(frame, op)
	for _, b := range body {
		frame = append(frame, b...)
	}
	if _, err := c.c.Write(frame); err != nil {
		c.t.Fatal(err)
	}
	var hdr [5]byte
	if _, err := io.ReadFull(c.c, hdr[:]); err != nil {
		c.t.Fatalf("read reply to op %d: %v", op, err)
	}
	out := make([]byte, binary.LittleEndian.Uint32(hdr[:4])-1)
	if _, err := io.ReadFull(c.c, out); err != nil {
		c.t.Fatal(err)
	}
	if hdr[4] != statusOK {
		return nil, string(out)
	}
	return out, ""
}

// ok is call that must succeed.
func (c *conn) ok(op byte, body ...[]byte) []byte {
	c.t.Helper()
	out, msg := c.call(op, body...)
	if msg != "" {
		c.t.Fatalf("op %d: %s", op, msg)
	}
	return out
}

func name(s string) []byte {
	return append(binary.LittleEndian.AppendUint16(nil, uint16(len(s))), s...)
}

func u32(n int) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(n)) }

func keysN(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i)*7919 + 3
	}
	return out
}

// pullRows pulls keys of table through c and checks the reply's dim.
func (c *conn) pullRows(table string, keys []uint64, dim int) []float32 {
	c.t.Helper()
	out := c.ok(opPull, name(table), ps.KeyBytes(keys))
	if got := int(binary.LittleEndian.Uint32(out)); got != dim {
		c.t.Fatalf("pull of %s says dim %d, want %d", table, got, dim)
	}
	rows, err := ps.BytesFloats(append([]byte(nil), out[4:]...))
	if err != nil {
		c.t.Fatal(err)
	}
	if len(rows) != len(keys)*dim {
		c.t.Fatalf("pull of %d keys of dim %d returned %d values", len(keys), dim, len(rows))
	}
	return rows
}

// A pull and push through the socket reach the right rows on whichever
// server owns each key, and clock and stats report what the servers hold.
func TestDeclarePullPushClockStats(t *testing.T) {
	c := startCluster(t, 2, 1, 0)
	p := startProxy(t, c, 0, token)
	cl := dial(t, p)
	cl.ok(opDeclare, []byte(`{"name": "emb", "dim": 4, "optimizer": {"kind": "sgd", "learning_rate": 0.5}}`))
	// Declaring it again alike is fine: every worker does.
	cl.ok(opDeclare, []byte(`{"name": "emb", "dim": 4, "optimizer": {"kind": "sgd", "learningRate": 0.5}}`))

	keys := keysN(1000)
	for _, v := range cl.pullRows("emb", keys, 4) {
		if v != 0 {
			t.Fatalf("a new row holds %v, want zeros", v)
		}
	}
	grads := make([]float32, len(keys)*4)
	for i := range grads {
		grads[i] = float32(i%13) - 6
	}
	cl.ok(opPush, name("emb"), u32(len(keys)), ps.KeyBytes(keys), ps.FloatBytes(grads))
	for i, v := range cl.pullRows("emb", keys, 4) {
		if want := -0.5 * grads[i]; v != want {
			t.Fatalf("value %d is %v after the push, want %v", i, v, want)
		}
	}
	if got := binary.LittleEndian.Uint64(cl.ok(opClock)); got != 1 {
		t.Fatalf("clock says %d steps, want 1", got)
	}
	var st Stats
	if err := json.Unmarshal(cl.ok(opStats), &st); err != nil {
		t.Fatal(err)
	}
	if st.Worker != 0 || st.Clock != 1 || len(st.Servers) != 2 {
		t.Fatalf("stats %+v: want worker 0 at clock 1 and 2 servers", st)
	}
	total := uint64(0)
	for _, s := range st.Servers {
		if len(s.Tables) != 1 || s.Tables[0].Name != "emb" || s.Tables[0].Keys == 0 || s.Clocks[0] != 1 {
			t.Fatalf("server %d: %+v: want a share of emb and worker 0 at clock 1", s.Server, s)
		}
		total += s.Tables[0].Keys
	}
	if total != uint64(len(keys)) {
		t.Fatalf("servers hold %d keys, want %d", total, len(keys))
	}

	// The only worker is never behind itself: the barrier returns.
	cl.ok(opBarrier)
	// Export writes every row once (by its owner).
	out := filepath.Join(t.TempDir(), "emb.parquet")
	if got := binary.LittleEndian.Uint64(cl.ok(opExport, name("emb"), []byte(out))); got != uint64(len(keys)) {
		t.Fatalf("export wrote %d rows, want %d", got, len(keys))
	}

	// A second connection of the same process shares the session.
	other := dial(t, p)
	if got := other.pullRows("emb", keys[:3], 4); got[0] != -0.5*grads[0] {
		t.Fatalf("second connection sees %v, want the pushed rows", got[:4])
	}
}

// Bad requests get a reply naming what is wrong, and change no row: the
// connection goes on.
func TestBadRequestsApplyNothing(t *testing.T) {
	c := startCluster(t, 2, 1, 0)
	p := startProxy(t, c, 0, token)
	cl := dial(t, p)
	cl.ok(opDeclare, []byte(`{"name": "emb", "dim": 2, "optimizer": {"kind": "sgd", "learning_rate": 1}}`))
	keys := keysN(50)
	grads := make([]float32, len(keys)*2)
	for i := range grads {
		grads[i] = 1
	}
	cl.ok(opPush, name("emb"), u32(len(keys)), ps.KeyBytes(keys), ps.FloatBytes(grads))
	before := cl.pullRows("emb", keys, 2)

	for _, tc := range []struct {
		name string
		op   byte
		body [][]byte
		want []string
	}{
		{"unknown op", 9, nil, []string{"unknown op 9"}},
		{"declare not JSON", opDeclare, [][]byte{[]byte(`name=emb`)}, []string{"declare", "table spec"}},
		{"declare unknown field", opDeclare, [][]byte{[]byte(`{"name": "x", "dim": 2, "size": 3}`)}, []string{"size"}},
		{"declare dim 0", opDeclare, [][]byte{[]byte(`{"name": "x", "dim": 0}`)}, []string{`table "x"`, "dim 0"}},
		{"declare bad optimizer", opDeclare, [][]byte{[]byte(`{"name": "x", "dim": 2, "optimizer": {"kind": "rmsprop"}}`)}, []string{`"rmsprop"`}},
		{"declare another spec", opDeclare, [][]byte{[]byte(`{"name": "emb", "dim": 3}`)}, []string{"table emb", "another spec", "parameter server"}},
		{"pull undeclared", opPull, [][]byte{name("nope"), ps.KeyBytes(keys)}, []string{`table "nope"`, "declare it first"}},
		{"pull ragged keys", opPull, [][]byte{name("emb"), make([]byte, 12)}, []string{"pull table emb", "12 bytes"}},
		{"pull no name", opPull, [][]byte{{0}}, []string{"table name length"}},
		{"pull empty name", opPull, [][]byte{name("")}, []string{"empty table name"}},
		{"push too few grads", opPush, [][]byte{name("emb"), u32(len(keys)), ps.KeyBytes(keys), ps.FloatBytes(grads[:len(grads)-1])},
			[]string{"push 50 keys of table emb (dim 2)", "want 400 (100 float32s)", "nothing applied"}},
		{"push short keys", opPush, [][]byte{name("emb"), u32(len(keys) + 1), ps.KeyBytes(keys)}, []string{"51 keys", "nothing applied"}},
		{"push undeclared", opPush, [][]byte{name("nope"), u32(1), ps.KeyBytes(keys[:1]), ps.FloatBytes(grads[:2])}, []string{`table "nope"`, "nothing applied"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, msg := cl.call(tc.op, tc.body...)
			if msg == "" {
				t.Fatal("the request succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
		})
	}
	after := cl.pullRows("emb", keys, 2)
	for i := range before {
		if before[i] != after[i] {
			t.Fatalf("value %d moved from %v to %v after bad requests", i, before[i], after[i])
		}
	}
	stats, err := c.goClient(t, 0).Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pushes := uint64(0)
	for _, s := range stats {
		for _, tb := range s.Tables {
			if tb.Name != "emb" {
				t.Errorf("server %d holds table %s, which a bad request named", s.Server, tb.Name)
			}
			pushes += tb.Pushes
		}
	}
	if pushes != 2 { // the one good push, on each server
		t.Errorf("servers applied %d pushes, want 2", pushes)
	}
}

// A frame over the bound is refused with a reason, and the connection
// closed: the proxy never reads (or allocates) it.
func TestFrameTooLarge(t *testing.T) {
	c := startCluster(t, 1, 1, 0)
	p := startProxy(t, c, 0, token)
	cl := dial(t, p)
	if _, err := cl.c.Write(binary.LittleEndian.AppendUint32(nil, MaxRequestBytes+1)); err != nil {
		t.Fatal(err)
	}
	var hdr [5]byte
	if _, err := io.ReadFull(cl.c, hdr[:]); err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(cl.c) // then EOF: the proxy hung up
	if hdr[4] != statusError || !strings.Contains(string(msg), "frame too large") {
		t.Fatalf("status %d %q: want an error about the frame's size", hdr[4], msg)
	}
}

// The socket is the proxy's authentication on the host: only its owner
// may connect.
func TestSocketPrivate(t *testing.T) {
	c := startCluster(t, 1, 1, 0)
	p := startProxy(t, c, 0, token)
	fi, err := os.Stat(p.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want a socket with mode 0600", fi.Mode())
	}
}

// A proxy without the job's peer token gets nothing from the servers.
func TestWrongTokenRefused(t *testing.T) {
	c := startCluster(t, 1, 1, 0)
	dir, err := os.MkdirTemp("", "psp")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	p, err := New(Config{Path: filepath.Join(dir, "ps.sock"), Logger: quiet(), Connect: func() (*client.Client, error) {
		return client.New(client.Config{Servers: c.Addrs, Token: strings.Repeat("z", 32), Logger: quiet()})
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// Declare waits for the servers to be ready, which they never are for
	// this proxy, until the run's end cuts it off: the reply is then an
	// error naming the table, or none at all if the proxy hung up first.
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(2*time.Second))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	cl := dial(t, p)
	req := binary.LittleEndian.AppendUint32(nil, 1+uint32(len(`{"name": "emb", "dim": 1}`)))
	req = append(append(req, opDeclare), `{"name": "emb", "dim": 1}`...)
	if _, err := cl.c.Write(req); err != nil {
		t.Fatal(err)
	}
	reply, _ := io.ReadAll(cl.c)
	if len(reply) > 0 && (len(reply) < 5 || reply[4] != statusError || !strings.Contains(string(reply[5:]), "declare table emb")) {
		t.Fatalf("declare with the wrong token: reply %q, want it refused naming the table", reply)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	stats, err := c.goClient(t, 0).Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(stats[0].Tables) != 0 {
		t.Fatalf("the server holds %v: the unauthenticated declare reached it", stats[0].Tables)
	}
}

// Under BSP, a worker that leaves no longer holds the others back; one
// whose proxy is closed without leaving (its process failed) still does,
// and the servers name it.
func TestLeaveAndAbandon(t *testing.T) {
	c := startCluster(t, 2, 3, 0)
	w0, w1 := startProxy(t, c, 0, token), startProxy(t, c, 1, token)
	c0, c1 := dial(t, w0), dial(t, w1)
	spec := []byte(`{"name": "w", "dim": 1}`)
	c0.ok(opDeclare, spec)
	c1.ok(opDeclare, spec)

	// Worker 2's process ended well without using the servers: its
	// executor leaves for it.
	w2 := startProxy(t, c, 2, token)
	if err := w2.Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Worker 0 leaves by itself; then its calls are refused.
	c0.ok(opLeave)
	c0.ok(opLeave) // twice is fine
	if _, msg := c0.call(opClock); !strings.Contains(msg, "has left") {
		t.Fatalf("a clock after leaving: %q, want it refused", msg)
	}
	// Worker 1 runs ahead: nothing holds it back.
	c1.ok(opClock)
	c1.pullRows("w", keysN(10), 1)

	var st Stats
	if err := json.Unmarshal(c1.ok(opStats), &st); err != nil {
		t.Fatal(err)
	}
	if got := st.Servers[0].Clocks; got[0] != -1 || got[1] != 1 || got[2] != -1 {
		t.Fatalf("clocks %v: want workers 0 and 2 left and worker 1 at 1", got)
	}

	// A proxy closed without leaving (its process failed) keeps its
	// worker's clock where it was.
	w1.Close()
	if _, msg := c1.call(opClock); msg == "" {
		t.Fatal("a clock through a closed proxy succeeded")
	}
	stats, err := c.goClient(t, 0).Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := stats[0].Clocks[1]; got != 1 {
		t.Fatalf("worker 1's clock is %d after its proxy closed, want it kept at 1", got)
	}
}

// The float32 rows cross the socket bit for bit, NaN and infinities
// included: the proxy does no conversion.
func TestRowsBitExact(t *testing.T) {
	c := startCluster(t, 1, 1, 0)
	p := startProxy(t, c, 0, token)
	cl := dial(t, p)
	cl.ok(opDeclare, []byte(`{"name": "b", "dim": 3, "optimizer": {"kind": "sgd", "learning_rate": 1}}`))
	keys := []uint64{0, math.MaxUint64, 1 << 63}
	grads := []float32{-1.5, float32(math.Inf(-1)), 1e-38, 2, 3, 4, -0.25, 5e-45, 7}
	cl.ok(opPush, name("b"), u32(3), ps.KeyBytes(keys), ps.FloatBytes(grads))
	for i, v := range cl.pullRows("b", keys, 3) {
		if want := -grads[i]; math.Float32bits(v) != math.Float32bits(want) {
			t.Fatalf("value %d is %v, want %v", i, v, want)
		}
	}
}
