package collective

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
)

// tcpPair returns the two ends of one loopback TCP connection.
func tcpPair(t *testing.T) (a, b *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-acc
	if s == nil {
		t.Fatal("accept failed")
	}
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// linkTwo builds the TCP links of two ranks joined by one stream each way,
// rank 0 with sender's settings and rank 1 with receiver's.
func linkTwo(t *testing.T, l0, l1 TCPLinker) (links [2]*tcpLink) {
	t.Helper()
	a01, b01 := tcpPair(t) // rank 0 sends to rank 1
	a10, b10 := tcpPair(t)
	setups := [2]LinkSetup{
		{Rank: 0, WorldSize: 2, Timeout: 10 * time.Second, Out: []*net.TCPConn{nil, a01}, In: []*net.TCPConn{nil, b10}, Logger: quietLogger()},
		{Rank: 1, WorldSize: 2, Timeout: 10 * time.Second, Out: []*net.TCPConn{a10, nil}, In: []*net.TCPConn{b01, nil}, Logger: quietLogger()},
	}
	var g errgroup.Group
	for r, l := range []TCPLinker{l0, l1} {
		g.Go(func() error {
			lk, err := l.Link(context.Background(), setups[r])
			if err == nil {
				links[r] = lk.(*tcpLink)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		links[0].Close()
		links[1].Close()
	})
	return links
}

func TestSharedMemoryBetweenRanksOnOneHost(t *testing.T) {
	needShm(t)
	links := linkTwo(t, TCPLinker{}, TCPLinker{})
	if links[0].shmOut[1] == nil || links[1].shmIn[0] == nil || links[1].shmOut[0] == nil || links[0].shmIn[1] == nil {
		t.Fatal("ranks on one host did not get shared-memory rings")
	}
	// This test's own rings, by name: other processes (a second make
	// test beside) make and remove rings in the same directory.
	for _, seg := range []*shmSegment{links[0].shmOut[1].seg, links[1].shmOut[0].seg} {
		if _, err := os.Stat(seg.path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ring file %s left behind after the hello (stat: %v)", seg.path, err)
		}
	}
	if got := shmReserved.Load(); got < 2*shmSegBytes {
		t.Errorf("%d bytes of rings counted, want at least the two rings' %d", got, 2*shmSegBytes)
	}

	// More than a ring's worth, in Sends that do not match the Recvs.
	want := make([]byte, 5*shmSlots*shmSlotBytes/2+13)
	for i := range want {
		want[i] = byte(i*7 + i>>11)
	}
	got := make([]byte, len(want))
	ctx := context.Background()
	var g errgroup.Group
	g.Go(func() error {
		for p := want; len(p) > 0; {
			n := min(len(p), 300_001)
			if err := links[0].Send(ctx, 1, p[:n]); err != nil {
				return err
			}
			p = p[n:]
		}
		return nil
	})
	g.Go(func() error {
		for p := got; len(p) > 0; {
			n := min(len(p), 77_777)
			if err := links[1].Recv(ctx, 0, p[:n]); err != nil {
				return err
			}
			p = p[n:]
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatal("bytes through the ring differ from those sent")
	}
}

// A sender that closes its end right after its last Send must not cost
// the receiver bytes it has yet to read: nothing the receiver writes back
// may reach a closed socket, whose reset would drop them.
func TestSharedMemoryRecvAfterSenderClosed(t *testing.T) {
	needShm(t)
	links := linkTwo(t, TCPLinker{}, TCPLinker{})
	ctx := context.Background()
	want := make([]byte, (shmSlots-1)*shmSlotBytes)
	for i := range want {
		want[i] = byte(i)
	}
	// Fill the ring but for one slot, then read a slot's worth, so that
	// the receiver empties slots while the sender is gone.
	if err := links[0].Send(ctx, 1, want); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if err := links[1].Recv(ctx, 0, got[:shmSlotBytes]); err != nil {
		t.Fatal(err)
	}
	links[0].Close()
	for p := got[shmSlotBytes:]; len(p) > 0; p = p[shmSlotBytes:] {
		if err := links[1].Recv(ctx, 0, p[:shmSlotBytes]); err != nil {
			t.Fatalf("receive after the sender closed: %v", err)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatal("bytes through the ring differ from those sent")
	}
	// The next receive finds the stream closed instead of waiting.
	err := links[1].Recv(ctx, 0, got[:1])
	if err == nil {
		t.Fatal("receive from a closed sender succeeded")
	}
}

func TestSharedMemoryDeclined(t *testing.T) {
	for _, tc := range []struct {
		name   string
		l0, l1 TCPLinker
		dir    string // shmDir, when not the default
	}{
		{"sender off", TCPLinker{NoSharedMemory: true}, TCPLinker{}, ""},
		{"receiver off", TCPLinker{}, TCPLinker{NoSharedMemory: true}, ""},
		{"no room for rings", TCPLinker{}, TCPLinker{}, filepath.Join(t.TempDir(), "missing")},
		{"budget spent", TCPLinker{}, TCPLinker{}, "budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			switch tc.dir {
			case "":
			case "budget":
				defer func(old int64) { shmBudget = old }(shmBudget)
				shmBudget = shmReserved.Load() + shmSegBytes - 1
			default:
				defer func(old string) { shmDir = old }(shmDir)
				shmDir = tc.dir
			}
			links := linkTwo(t, tc.l0, tc.l1)
			if links[0].shmOut[1] != nil || links[1].shmIn[0] != nil || links[1].shmOut[0] != nil || links[0].shmIn[1] != nil {
				t.Fatal("a rank that keeps to TCP got a shared-memory ring")
			}
			ctx := context.Background()
			errc := make(chan error, 1)
			go func() { errc <- links[0].Send(ctx, 1, []byte("over tcp")) }()
			got := make([]byte, 8)
			if err := links[1].Recv(ctx, 0, got); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil || string(got) != "over tcp" {
				t.Fatalf("got %q, %v", got, err)
			}
		})
	}
}

// A ring offered by another host (another boot id) is not looked for.
func TestSharedMemoryOtherHost(t *testing.T) {
	a, b := tcpPair(t)
	defer a.Close()
	defer b.Close()
	h := shmHello{boot: "another-host", path: filepath.Join(t.TempDir(), "ring")}
	go a.Write(h.encode())
	r, err := acceptRing(b, true)
	if err != nil || r != nil {
		t.Fatalf("acceptRing = %v, %v; want no ring", r, err)
	}
	var yes [1]byte
	if _, err := a.Read(yes[:]); err != nil || yes[0] != 0 {
		t.Fatalf("answer %v, %v; want no", yes[0], err)
	}
}

func TestSharedMemoryHelloFromOldPeer(t *testing.T) {
	a, b := tcpPair(t)
	defer a.Close()
	defer b.Close()
	go a.Write([]byte("garbage that is not a hello"))
	_, err := acceptRing(b, true)
	if err == nil || !strings.Contains(err.Error(), "shared-memory hello") {
		t.Fatalf("err = %v, want one naming the missing hello", err)
	}
}

// TestLinkSaysWhatCarriesIt: Over names shared memory for streams on
// rings and tcp for streams left on sockets.
func TestLinkSaysWhatCarriesIt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		l0, l1 TCPLinker
		want   [2]string
	}{
		{"rings", TCPLinker{}, TCPLinker{}, [2]string{"shared memory", "shared memory"}},
		{"sockets", TCPLinker{NoSharedMemory: true}, TCPLinker{NoSharedMemory: true}, [2]string{"tcp", "tcp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			links := linkTwo(t, tc.l0, tc.l1)
			for r, lk := range links {
				if got := Over(lk); got != tc.want[r] {
					t.Errorf("rank %d: over %q, want %q", r, got, tc.want[r])
				}
			}
		})
	}
}

// TestSetupOutlastsAShortProgressTimeout: the shared-memory hello is
// bounded by the setup's timeout, not the operations' progress timeout: a
// rank whose peer starts its hello later than a short progress timeout
// (a loaded host mapping its ring) still links, where it used to fail with
// an i/o timeout (collective TestPeerStall beside a second make test).
func TestSetupOutlastsAShortProgressTimeout(t *testing.T) {
	needShm(t)
	a01, b01 := tcpPair(t)
	a10, b10 := tcpPair(t)
	const progress = 20 * time.Millisecond
	setups := [2]LinkSetup{
		{Rank: 0, WorldSize: 2, Timeout: progress, SetupTimeout: time.Minute, Out: []*net.TCPConn{nil, a01}, In: []*net.TCPConn{nil, b10}, Logger: quietLogger()},
		{Rank: 1, WorldSize: 2, Timeout: progress, SetupTimeout: time.Minute, Out: []*net.TCPConn{a10, nil}, In: []*net.TCPConn{b01, nil}, Logger: quietLogger()},
	}
	var links [2]Link
	var errs [2]error
	var g sync.WaitGroup
	for r := range setups {
		g.Go(func() {
			if r == 1 {
				time.Sleep(10 * progress) // the peer's hello comes late
			}
			links[r], errs[r] = TCPLinker{}.Link(context.Background(), setups[r])
		})
	}
	g.Wait()
	for _, l := range links {
		if l != nil {
			l.Close()
		}
	}
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("ranks linking with a %s progress timeout and a minute for setup: %v, %v; want both linked", progress, errs[0], errs[1])
	}
}
