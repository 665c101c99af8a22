package client

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
	"github.com/spindle-ml/spindle/rdma/ucx"
)

// needUCX skips the test, saying why, when this binary cannot use UCX.
func needUCX(t testing.TB) {
	t.Helper()
	if ok, why := ucx.Available(); !ok {
		t.Skipf("UCX data link not tested: %s", why)
	}
}

// transports are the UCX transports the data link is tested on: UCX's
// TCP and shared memory, both on any Linux host.
var transports = []string{"tcp", "sm"}

// setLink runs the rest of t with pulls and pushes over UCX on transport
// tls (UCX reads UCX_TLS when a worker starts), required: a server or
// client that cannot use it fails the test rather than falling back.
func setLink(t *testing.T, tls string) {
	t.Helper()
	t.Setenv("UCX_TLS", tls)
	t.Setenv("UCX_LOG_LEVEL", "fatal") // shared memory has no peer failure reports: UCX logs it
	testLink = "ucx:required"
	t.Cleanup(func() { testLink = "" })
}

// The client's tests again, with every pull and push over UCX: round
// trips, dense tables, consistency models, refused pushes, stale rings,
// and a server lost and replaced while workers push (exact sums). Each
// fails unless the servers took pulls and pushes over UCX. Under the race
// detector it runs a sample.
func TestOverUCX(t *testing.T) {
	needUCX(t)
	tests := []struct {
		name string
		run  func(*testing.T)
	}{
		{"RoundTrip", TestPullPushRoundTrip},
		{"DenseTable", TestDenseTable},
		{"StaleRing", TestStaleRingRefreshed},
		{"OutOfMemory", TestOutOfMemoryNamed},
		{"Consistency", TestConsistencyModels},
		{"WaitNamed", TestWaitReleasedOrNamed},
		{"Optimizers", TestOptimizerSteps},
		{"ServerLoss", TestServerLossLosesNoAcknowledgedPush},
		{"Replacement", TestReplacementRejoins},
		{"BadRequests", testBadRequestsOverUCX},
	}
	for _, tls := range transports {
		if testutil.RaceDetector && tls != "tcp" {
			// Under -race: TCP only, without the server's loss (the
			// link's Go side is the same on both transports); every
			// case runs without the detector too (RACE_SAMPLED_TESTS).
			continue
		}
		t.Run(tls, func(t *testing.T) {
			setLink(t, tls)
			for _, tc := range tests {
				if testutil.RaceDetector && tc.name == "ServerLoss" {
					continue
				}
				t.Run(tc.name, tc.run)
			}
		})
	}
}

// Requests the client would never send, straight over a UCX session, are
// refused as over gRPC, with the same codes, and apply nothing.
func testBadRequestsOverUCX(t *testing.T) {
	c := startCluster(t, clusterOpts{servers: 2, workers: 1})
	cl := c.client(t, 0)
	ctx := ctx(t)
	if err := cl.Declare(ctx, &ps.TableSpec{Name: "emb", Dim: 4}); err != nil {
		t.Fatal(err)
	}
	conn, err := cl.dataConn(ctx, 0)
	if err != nil || conn == nil {
		t.Fatalf("no UCX session with server 0: %v", err)
	}
	ring := cl.ring.Load()
	var mine, theirs []uint64
	for _, k := range keysN(100) {
		if ring.Owner(k) == 0 {
			mine = append(mine, k)
		} else {
			theirs = append(theirs, k)
		}
	}
	push := func(table string, worker int32, version uint64, nkeys int) ps.DataHead {
		return ps.DataHead{Op: ps.OpPush, Worker: worker, RingVersion: version, Seq: 1, Keys: uint32(nkeys), Table: table}
	}
	cases := []struct {
		name  string
		head  ps.DataHead
		body  [][]byte
		code  codes.Code
		says  string
		bytes []byte // a raw head instead of head
	}{
		{"unknown table", push("nope", 0, 1, len(mine)), [][]byte{ps.KeyBytes(mine), make([]byte, len(mine)*16)}, codes.NotFound, `no table "nope"`, nil},
		{"wrong dim", push("emb", 0, 1, len(mine)), [][]byte{ps.KeyBytes(mine), make([]byte, len(mine)*12)}, codes.InvalidArgument, "has dim 4", nil},
		{"keys beyond the body", push("emb", 0, 1, len(mine)+5), [][]byte{ps.KeyBytes(mine)}, codes.InvalidArgument, "a body of", nil},
		{"unknown worker", push("emb", 5, 1, len(mine)), [][]byte{ps.KeyBytes(mine), make([]byte, len(mine)*16)}, codes.InvalidArgument, "worker 5", nil},
		{"key of another server", push("emb", 0, 1, len(theirs)), [][]byte{ps.KeyBytes(theirs), make([]byte, len(theirs)*16)}, codes.InvalidArgument, "belongs to server 1", nil},
		{"stale ring", push("emb", 0, 7, len(mine)), [][]byte{ps.KeyBytes(mine), make([]byte, len(mine)*16)}, codes.FailedPrecondition, "stale ring", nil},
		{"unknown operation", ps.DataHead{Op: 9, Table: "emb"}, nil, codes.InvalidArgument, "operation 9", nil},
		{"torn head", ps.DataHead{}, nil, codes.InvalidArgument, "head of 3 bytes", []byte{1, 2, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			head := tc.bytes
			if head == nil {
				head = ps.AppendDataHead(nil, tc.head)
			}
			r, err := conn.Call(ctx, head, tc.body, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = replyErr(r.Head)
			r.Release()
			if st, _ := status.FromError(err); st.Code() != tc.code || !strings.Contains(st.Message(), tc.says) {
				t.Fatalf("got %v, want %s saying %q", err, tc.code, tc.says)
			}
		})
	}
	stats, _ := cl.Stats(ctx)
	for i, s := range stats {
		if s.Tables[0].Pushes != 0 || s.Tables[0].Keys != 0 {
			t.Fatalf("server %d applied %d pushes, holds %d keys after refused pushes", i, s.Tables[0].Pushes, s.Tables[0].Keys)
		}
	}
}

// A caller that reaches a server's UCX worker without a session granted
// over an authenticated connection (a forged grant, or a real session id
// with a guessed key) gets no answer and changes nothing; a client with
// the wrong peer token cannot open a session at all.
func TestUnauthenticatedUCXRefused(t *testing.T) {
	needUCX(t)
	for _, tls := range transports {
		t.Run(tls, func(t *testing.T) {
			setLink(t, tls)
			c := startCluster(t, clusterOpts{servers: 1, workers: 1})
			cl := c.client(t, 0)
			ctx := ctx(t)
			if err := cl.Declare(ctx, &ps.TableSpec{Name: "emb", Dim: 1, Optimizer: &pspb.Optimizer{Kind: ps.SGD, LearningRate: 1}}); err != nil {
				t.Fatal(err)
			}
			keys := keysN(10)
			if err := cl.Push(ctx, "emb", keys, make([]float32, 10)); err != nil {
				t.Fatal(err)
			}
			conn, err := cl.dataConn(ctx, 0)
			if err != nil || conn == nil {
				t.Fatalf("no UCX session: %v", err)
			}
			d, err := ucx.NewDialer()
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			srv := c.Servers[0]
			grad := make([]float32, 10)
			for i := range grad {
				grad[i] = 1
			}
			head := ps.AppendDataHead(nil, ps.DataHead{Op: ps.OpPush, RingVersion: 1, Seq: 99, Keys: 10, Table: "emb"})
			for _, g := range []ucx.Grant{{}, {ID: 12345, Key: [16]byte{1, 2, 3}}} {
				rogue, err := d.Connect(srv.DataLinkAddress(), g)
				if err != nil {
					t.Fatal(err)
				}
				before := srv.DataLinkRefused()
				cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				_, err = rogue.Call(cctx, head, [][]byte{ps.KeyBytes(keys), ps.FloatBytes(grad)}, nil)
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("a push with grant %d: %v, want no answer", g.ID, err)
				}
				testutil.WaitFor(t, 5*time.Second, testutil.Holds("refusal counted", func() bool { return srv.DataLinkRefused() != before }))
				if srv.DataLinkRefused() != before+1 {
					t.Fatalf("the server refused %d requests, want %d", srv.DataLinkRefused(), before+1)
				}
				rogue.Close()
			}
			got := make([]float32, 10)
			if err := cl.Pull(ctx, "emb", keys, got); err != nil {
				t.Fatal(err)
			}
			for i, v := range got {
				if v != 0 {
					t.Fatalf("value %d is %v: a forged push was applied", i, v)
				}
			}
			// Without the token there is no session to be had.
			bad, err := New(Config{Servers: c.Addrs, Token: strings.Repeat("z", 32), DataLink: "ucx", Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			defer bad.closeConns()
			bctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if conn, err := bad.dataConn(bctx, 0); err == nil || conn != nil {
				t.Fatalf("a client with the wrong token opened a UCX session (%v)", err)
			}
		})
	}
}

// The data link's selection: a client offering UCX to servers that do not
// offer it falls back to gRPC (auto) or fails naming the server
// (required); a client not offering it uses gRPC with any server. One
// that declines says it keeps to gRPC instead of UCX, never "grpc" beside
// "selected=ucx", which read as a contradiction.
func TestDataLinkSelection(t *testing.T) {
	needUCX(t)
	t.Setenv("UCX_TLS", "tcp")
	for _, tc := range []struct {
		name, server, client string
		overUCX              bool
		fails, says          string
	}{
		{"both ucx", "ucx", "ucx", true, "", ""},
		{"server tcp, client ucx", "", "ucx", false, "", ""},
		{"server declined, client ucx", "ucx:declined", "ucx", false, "", ""},
		{"server tcp, client required", "", "ucx:required", false, "parameter server 0 declines it", ""},
		{"client declined", "ucx", "ucx:declined", false, "",
			`msg="parameter-server data link is grpc instead of ucx" .*reason="no usable RDMA device on this rank"`},
		{"client tcp", "ucx", "tcp", false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testLink = tc.server
			c := startCluster(t, clusterOpts{servers: 1, workers: 1})
			testLink = ""
			var log syncbuf.Buffer
			cl, err := New(Config{Servers: c.Addrs, Token: token, DataLink: tc.client, Logger: slog.New(slog.NewTextHandler(&log, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.closeConns()
			ctx := ctx(t)
			if err := cl.Declare(ctx, &ps.TableSpec{Name: "emb", Dim: 2}); err != nil {
				t.Fatal(err)
			}
			err = cl.Push(ctx, "emb", keysN(50), make([]float32, 100))
			if tc.fails != "" {
				if err == nil || !strings.Contains(err.Error(), tc.fails) {
					t.Fatalf("got %v, want an error saying %q", err, tc.fails)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Servers[0].DataLinkServed() > 0; got != tc.overUCX {
				t.Fatalf("push over UCX: %v, want %v", got, tc.overUCX)
			}
			if tc.says != "" && (!regexp.MustCompile(tc.says).MatchString(log.String()) || strings.Contains(log.String(), "selected=ucx")) {
				t.Fatalf("the client's log does not say %s:\n%s", tc.says, log.String())
			}
		})
	}
	if _, err := New(Config{Servers: []string{"127.0.0.1:1"}, Token: token, DataLink: "ucx:sometimes"}); err == nil ||
		!strings.Contains(err.Error(), "sometimes") {
		t.Fatalf("a bad data link: %v", err)
	}
}
