package collective

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

const (
	testToken  = "0f1e2d3c4b5a69788796a5b4c3d2e1f0-test-token"
	otherToken = "ffeeddccbbaa99887766554433221100-other-token"
)

// withToken gives every rank testToken.
func withToken(_ int, cfg *Config) { cfg.Token = testToken }

// noSecret fails the test if err's text shows either token.
func noSecret(t *testing.T, what, text string) {
	t.Helper()
	for _, tok := range []string{testToken, otherToken} {
		if strings.Contains(text, tok) {
			t.Fatalf("%s shows a peer token: %q", what, text)
		}
	}
}

func TestTokenOps(t *testing.T) {
	onLinks(t, func(t *testing.T, link testLink) {
		const n = 3
		comms := cluster(t, n, link.on(func(r int, cfg *Config) {
			withToken(r, cfg)
			cfg.ChunkBytes = 256
		}))
		ctx := context.Background()
		in := make([][]float32, n)
		for r := range n {
			in[r] = inputs[float32](r, 1000)
		}
		want := ringReference(in, Sum)
		if a := comms[0].allReduceAlgo(len(in[0]) * 4); a == algoTree || a == algoHost {
			want = treeReference(in, Sum)
		}
		got := make([][]float32, n)
		mustAll(t, onAll(t, comms, func(c *Comm) error {
			got[c.Rank()] = append([]float32(nil), in[c.Rank()]...)
			return AllReduce(ctx, c, got[c.Rank()], Sum)
		}))
		for r := range n {
			for i := range want {
				if got[r][i] != want[i] {
					t.Fatalf("allreduce: rank %d element %d = %v, want %v", r, i, got[r][i], want[i])
				}
			}
		}
		bufs := make([][]int64, n)
		mustAll(t, onAll(t, comms, func(c *Comm) error {
			bufs[c.Rank()] = []int64{int64(c.Rank()), 7}
			return Broadcast(ctx, c, bufs[c.Rank()], 2)
		}))
		for r := range n {
			if bufs[r][0] != 2 || bufs[r][1] != 7 {
				t.Fatalf("broadcast: rank %d has %v, want [2 7]", r, bufs[r])
			}
		}
		gathered := make([][]uint16, n)
		mustAll(t, onAll(t, comms, func(c *Comm) error {
			gathered[c.Rank()] = make([]uint16, n)
			return AllGather(ctx, c, []uint16{uint16(10 + c.Rank())}, gathered[c.Rank()])
		}))
		for r := range n {
			for src := range n {
				if gathered[r][src] != uint16(10+src) {
					t.Fatalf("allgather: rank %d has %v", r, gathered[r])
				}
			}
		}
		mustAll(t, onAll(t, comms, func(c *Comm) error { return c.Barrier(ctx) }))
	})
}

func TestTokenMismatch(t *testing.T) {
	onLinks(t, func(t *testing.T, link testLink) {
		type want struct {
			blames int
			says   string
			// racy: with three ranks, who hears of the mismatch from whom,
			// and who finds a peer already gone, depends on scheduling. Then
			// only the blamed rank is checked (-1: any other rank), whatever
			// the error kind.
			racy bool
		}
		tests := []struct {
			name   string
			world  int
			tokens []string // by rank
			want   map[int]want
		}{
			{
				name:   "wrong token",
				world:  2,
				tokens: []string{testToken, otherToken},
				want: map[int]want{
					// A rank hears of the mismatch as a dialer, or, if its peer
					// gave up and exited before it could dial, as a listener
					// when it stops waiting.
					0: {1, "hold different peer tokens", false},
					1: {0, "hold different peer tokens", false},
				},
			},
			{
				name:   "missing token",
				world:  2,
				tokens: []string{testToken, ""},
				want: map[int]want{
					0: {1, "peer token", false},
					1: {0, "peer token", false},
				},
			},
			{
				// Rank 1 holds the wrong token. Rank 0 is refused by it, hears
				// of it from rank 2 or finds it gone: either way rank 1 is
				// named. Rank 1 is refused by rank 2, refuses rank 0, or finds
				// a neighbour gone.
				name:   "wrong token among three",
				world:  3,
				tokens: []string{testToken, otherToken, testToken},
				want: map[int]want{
					0: {1, "", true},
					1: {-1, "", true},
				},
			},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_, errs := startRanks(t, tc.world, link.on(func(r int, cfg *Config) {
					cfg.ConnectTimeout = testutil.Scale(5 * time.Second)
					cfg.Token = tc.tokens[r]
				}))
				for r, err := range errs {
					if err == nil {
						t.Fatalf("rank %d: New succeeded", r)
					}
					noSecret(t, "error", err.Error())
					w, ok := tc.want[r]
					if !ok {
						continue
					}
					var pe *PeerError
					if w.racy {
						if !errors.As(err, &pe) || pe.Rank == r || (w.blames >= 0 && pe.Rank != w.blames) {
							t.Fatalf("rank %d: got %v, want a *PeerError blaming rank %d", r, err, w.blames)
						}
						continue
					}
					if !errors.As(err, &pe) || pe.Rank != w.blames || !strings.Contains(err.Error(), w.says) || !errors.Is(err, ErrHandshake) {
						t.Fatalf("rank %d: got %v, want ErrHandshake blaming rank %d and saying %q", r, err, w.blames, w.says)
					}
					if !strings.Contains(err.Error(), pe.Addr) {
						t.Fatalf("rank %d: error %q does not name the peer address", r, err)
					}
				}
			})
		}
	})
}

// sendHello dials addr, sends h (signed by a, when not nil, at time at)
// and returns the listener's answer.
func sendHello(t *testing.T, addr string, h hello, a *authenticator, at time.Time) (status uint8, reason string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
	if a != nil {
		if err := a.sign(&h, at); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeHello(c, h); err != nil {
		t.Fatal(err)
	}
	status, reason, err = readStatus(c)
	if err != nil {
		t.Fatalf("read the reply to %+v: %v", h, err)
	}
	return status, reason
}

// strangerHellos are the hellos of a process that is not part of the job
// but knows everything about it except the token. Each must be refused
// with a reason that says why.
func strangerHellos(from, to int) []struct {
	name string
	h    hello
	a    *authenticator
	at   time.Duration // timestamp offset from now
	says string
} {
	base := hello{version: protoVersion, order: byteOrderMark, from: uint32(from), to: uint32(to), world: 2, jobID: "test-job"}
	type tc = struct {
		name string
		h    hello
		a    *authenticator
		at   time.Duration
		says string
	}
	var out []tc
	for _, kind := range []uint8{kindLink, kindNotice, kindProbe} {
		h := base
		h.kind = kind
		out = append(out,
			tc{"no proof", h, nil, 0, "carries no proof of the job's peer token"},
			tc{"wrong token", h, newAuthenticator(otherToken), 0, "hold different peer tokens"},
			// Right token, but a stale or future timestamp: a hello
			// recorded long ago, or a clock far off.
			tc{"stale", h, newAuthenticator(testToken), -6 * time.Minute, "away from rank"},
			tc{"future", h, newAuthenticator(testToken), 6 * time.Minute, "more than the 5m0s allowed"},
		)
	}
	return out
}

// TestStrangerIsRefused sends a running job every kind of connection a
// process without the token could make, and checks that each is refused
// and that none aborts the job.
func TestStrangerIsRefused(t *testing.T) {
	onLinks(t, func(t *testing.T, link testLink) {
		comms := cluster(t, 2, link.on(withToken))
		addr := comms[0].peers[0]
		for _, tc := range strangerHellos(1, 0) {
			t.Run(tc.name, func(t *testing.T) {
				status, reason := sendHello(t, addr, tc.h, tc.a, time.Now().Add(tc.at))
				if status == 0 || !strings.Contains(reason, tc.says) {
					t.Fatalf("kind %d: status %d %q, want a refusal saying %q", tc.h.kind, status, reason, tc.says)
				}
				noSecret(t, "reason", reason)
			})
		}
		// Not one of the notices got through.
		mustAll(t, onAll(t, comms, func(c *Comm) error { return c.Barrier(context.Background()) }))
	})
}

// TestProofToTokenlessRank checks that a rank without a token refuses a
// hello with a proof rather than ignore it: the ranks disagree on whether
// to authenticate, which is a misconfiguration.
func TestProofToTokenlessRank(t *testing.T) {
	comms := cluster(t, 2, nil)
	h := hello{version: protoVersion, kind: kindProbe, order: byteOrderMark, from: 1, to: 0, world: 2, jobID: "test-job"}
	status, reason := sendHello(t, comms[0].peers[0], h, newAuthenticator(testToken), time.Now())
	if want := "carries a peer-token proof, but rank 0 has no peer token (set SPINDLE_PEER_TOKEN for every rank or for none)"; status == 0 || !strings.Contains(reason, want) {
		t.Fatalf("status %d %q, want a refusal saying %q", status, reason, want)
	}
	// Without a proof, as before tokens existed.
	h.proof, h.flags = nil, 0
	if status, reason := sendHello(t, comms[0].peers[0], h, nil, time.Time{}); status != 0 {
		t.Fatalf("unsigned probe refused: %q", reason)
	}
}

// linkPair starts rank 0 of a two-rank job, which waits for a link from
// rank 1, as a bare transport.
func linkPair(t *testing.T, connectTimeout time.Duration) (ln net.Listener, peers []string, res chan error) {
	t.Helper()
	ln0, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	peers = []string{ln0.Addr().String(), ln1.Addr().String()}
	res = make(chan error, 1)
	var m *Mesh
	go func() {
		var err error
		m, err = NewMesh(MeshConfig{
			Rank: 0, WorldSize: 2, Peers: peers, Listener: ln0, JobID: "test-job", Token: testToken,
			Timeout: 5 * time.Second, ConnectTimeout: connectTimeout, Logger: quietLogger(),
		})
		if err == nil {
			_, _, err = m.Streams(context.Background(), nil, []int{1})
		}
		res <- err
	}()
	t.Cleanup(func() {
		if m != nil {
			m.Close()
		}
	})
	return ln1, peers, res
}

// TestRefusedLinkDuringSetup checks that a stranger's link does not abort
// a rank that is still waiting for its neighbour, and that the refusal
// explains the neighbour's absence if it never comes.
func TestRefusedLinkDuringSetup(t *testing.T) {
	t.Run("neighbour comes", func(t *testing.T) {
		ln1, peers, res := linkPair(t, 20*time.Second)
		defer ln1.Close()
		for _, tc := range strangerHellos(1, 0)[:4] { // the links
			if status, reason := sendHello(t, peers[0], tc.h, tc.a, time.Now().Add(tc.at)); status == 0 {
				t.Fatalf("%s: accepted (%q)", tc.name, reason)
			}
		}
		m1, err := NewMesh(MeshConfig{
			Rank: 1, WorldSize: 2, Peers: peers, Listener: ln1, JobID: "test-job", Token: testToken,
			Timeout: testutil.Scale(5 * time.Second), ConnectTimeout: testutil.Scale(20 * time.Second), Logger: quietLogger(),
		})
		if err != nil {
			t.Fatalf("rank 1: %v", err)
		}
		defer m1.Close()
		if _, _, err := m1.Streams(context.Background(), []int{0}, nil); err != nil {
			t.Fatalf("rank 1: %v", err)
		}
		if err := <-res; err != nil {
			t.Fatalf("rank 0, after strangers tried: %v", err)
		}
	})
	t.Run("neighbour never comes", func(t *testing.T) {
		ln1, peers, res := linkPair(t, 500*time.Millisecond)
		defer ln1.Close()
		tc := strangerHellos(1, 0)[1] // wrong token
		sendHello(t, peers[0], tc.h, tc.a, time.Now())
		err := <-res
		var pe *PeerError
		if !errors.As(err, &pe) || pe.Rank != 1 || pe.Addr != peers[1] || !errors.Is(err, ErrHandshake) ||
			!strings.Contains(err.Error(), "claiming to be it was refused: the hello's peer-token proof does not verify") {
			t.Fatalf("got %v, want ErrHandshake naming rank 1 and the refused link", err)
		}
		noSecret(t, "error", err.Error())
	})
}

// recorder forwards one connection to upstream and keeps a copy of the
// first n bytes the client sent.
type recorder struct {
	ln       net.Listener
	upstream string
	n        int
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
	got      []byte
	recorded chan struct{}
}

func newRecorder(t *testing.T, upstream string, n int) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{ln: ln, upstream: upstream, n: n, recorded: make(chan struct{})}
	r.wg.Add(1)
	go r.run()
	t.Cleanup(r.close)
	return r
}

func (r *recorder) run() {
	defer r.wg.Done()
	c, err := r.ln.Accept()
	if err != nil {
		return
	}
	up, err := net.Dial("tcp", r.upstream)
	if err != nil {
		c.Close()
		return
	}
	r.mu.Lock()
	r.conns = append(r.conns, c, up)
	r.mu.Unlock()
	buf := make([]byte, r.n)
	if _, err := io.ReadFull(c, buf); err != nil {
		return
	}
	r.got = buf
	close(r.recorded)
	if _, err := up.Write(buf); err != nil {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		io.Copy(c, up)
		c.Close()
	}()
	io.Copy(up, c)
	up.Close()
}

func (r *recorder) close() {
	r.ln.Close()
	r.mu.Lock()
	for _, c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// TestReplayedHello records the hello rank 0 really sent rank 1 and sends
// it again, as an eavesdropper on the network could.
func TestReplayedHello(t *testing.T) {
	var rec *recorder
	comms := cluster(t, 2, func(r int, cfg *Config) {
		withToken(r, cfg)
		if r == 0 {
			// Rank 0 reaches rank 1 through the recorder.
			n := helloFixed + len(cfg.JobID) + proofLen
			rec = newRecorder(t, cfg.Peers[1], n)
			cfg.Peers = []string{cfg.Peers[0], rec.ln.Addr().String()}
		}
	})
	<-rec.recorded
	addr := comms[1].peers[1]
	replay := func(b []byte) (uint8, string) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		status, reason, err := readStatus(c)
		if err != nil {
			t.Fatal(err)
		}
		return status, reason
	}
	if status, reason := replay(rec.got); status == 0 || !strings.Contains(reason, "replays one rank 1 already accepted") {
		t.Fatalf("replayed hello: status %d %q, want a refusal", status, reason)
	}
	// The same hello turned into a probe, keeping the proof.
	tampered := bytes.Clone(rec.got)
	tampered[6] = kindProbe
	if status, reason := replay(tampered); status == 0 || !strings.Contains(reason, "does not verify") {
		t.Fatalf("tampered hello: status %d %q, want a refusal", status, reason)
	}
	mustAll(t, onAll(t, comms, func(c *Comm) error { return c.Barrier(context.Background()) }))
}

// TestImpostorListener checks that a dialer refuses a listener that does
// not hold the token, even if it accepts every hello.
func TestImpostorListener(t *testing.T) {
	fake, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer fake.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := fake.Accept()
			if err != nil {
				return
			}
			c.SetDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
			if _, err := readHello(c); err == nil {
				writeStatus(c, 0, "")
				c.Write(make([]byte, macLen)) // a reply mac it cannot compute
			}
			c.Close()
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(context.Background(), Config{
		Rank: 0, WorldSize: 2, Peers: []string{ln.Addr().String(), fake.Addr().String()}, Listener: ln,
		Token: testToken, ConnectTimeout: testutil.Scale(10 * time.Second), Logger: quietLogger(),
	})
	var pe *PeerError
	if !errors.As(err, &pe) || pe.Rank != 1 || pe.Addr != fake.Addr().String() || !errors.Is(err, ErrHandshake) ||
		!strings.Contains(err.Error(), "does not prove the job's peer token") {
		t.Fatalf("got %v, want ErrHandshake naming rank 1 at %s", err, fake.Addr())
	}
}

func TestReplayCache(t *testing.T) {
	a := newAuthenticator(testToken)
	now := time.Unix(1_700_000_000, 0)
	nonce := func(i int) (n [nonceLen]byte) {
		n[0], n[1], n[2] = byte(i), byte(i>>8), 1
		return n
	}
	if r := a.remember(nonce(0), now, 0, now); r != "" {
		t.Fatalf("first use refused: %s", r)
	}
	if r := a.remember(nonce(0), now, 0, now.Add(maxClockSkew)); !strings.Contains(r, "replays") {
		t.Fatalf("reuse within the window: %q, want a refusal", r)
	}
	// Fill the cache: it refuses rather than forget nonces still valid.
	for i := 1; i < maxReplayEntries; i++ {
		if r := a.remember(nonce(i), now.Add(time.Minute), 0, now.Add(time.Minute)); r != "" {
			t.Fatalf("nonce %d refused: %s", i, r)
		}
	}
	if r := a.remember(nonce(maxReplayEntries), now.Add(time.Minute), 0, now.Add(time.Minute)); !strings.Contains(r, "remembers no more") {
		t.Fatalf("full cache: %q, want a refusal", r)
	}
	// Once the first nonce's timestamp is out of the window it is
	// forgotten, which frees room; the others are still remembered.
	later := now.Add(maxClockSkew + time.Second)
	if r := a.remember(nonce(maxReplayEntries), later, 0, later); r != "" {
		t.Fatalf("after the first nonce expired: %s", r)
	}
	if _, ok := a.seen[nonce(0)]; ok {
		t.Fatal("an expired nonce was kept")
	}
	if r := a.remember(nonce(5), later, 0, later); !strings.Contains(r, "replays") {
		t.Fatalf("reuse of a live nonce after pruning: %q", r)
	}
	// Much later, everything is pruned.
	muchLater := later.Add(2 * maxClockSkew)
	a.remember(nonce(0), muchLater, 0, muchLater)
	if len(a.seen) != 1 {
		t.Fatalf("%d nonces remembered after all expired, want 1", len(a.seen))
	}
}

// TestTokenMismatchBeforeStreams: one rank holds the token and the other
// none, and one of them is slow to ask for its streams (a loaded machine).
// The fast rank dials, is refused and gives up; its notice is refused too,
// since the ranks disagree on the token. The slow rank must still say the
// ranks disagree on the peer token, not that its peer never connected.
func TestTokenMismatchBeforeStreams(t *testing.T) {
	for _, slow := range []int{0, 1} { // rank 0 holds the token, rank 1 none
		t.Run(fmt.Sprintf("slow=%d", slow), func(t *testing.T) {
			peers := make([]string, 2)
			lns := make([]net.Listener, 2)
			for r := range lns {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				lns[r], peers[r] = ln, ln.Addr().String()
			}
			meshes := make([]*Mesh, 2)
			for r, tok := range []string{testToken, ""} {
				m, err := NewMesh(MeshConfig{
					Rank: r, WorldSize: 2, Peers: peers, Listener: lns[r], JobID: "test-job", Token: tok,
					Timeout: testutil.Scale(5 * time.Second), ConnectTimeout: testutil.Scale(time.Second), Logger: quietLogger(),
				})
				if err != nil {
					t.Fatal(err)
				}
				meshes[r] = m
				defer m.Close()
			}
			fast := 1 - slow
			ctx := context.Background()
			if _, _, err := meshes[fast].Streams(ctx, []int{slow}, []int{slow}); !errors.Is(err, ErrHandshake) {
				t.Fatalf("fast rank %d: got %v, want ErrHandshake", fast, err)
			}
			meshes[fast].Close() // it exits
			_, _, err := meshes[slow].Streams(ctx, []int{fast}, []int{fast})
			var pe *PeerError
			if !errors.As(err, &pe) || pe.Rank != fast || !errors.Is(err, ErrHandshake) || !strings.Contains(err.Error(), "peer token") {
				t.Fatalf("slow rank %d: got %v, want ErrHandshake blaming rank %d and saying \"peer token\"", slow, err, fast)
			}
		})
	}
}
