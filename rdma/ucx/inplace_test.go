package ucx

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/spindle-ml/spindle/collective"
)

// keptLinker is a Linker that keeps the link it built, so a test can use
// it directly.
type keptLinker struct {
	collective.Linker
	mu   sync.Mutex
	link collective.Link
}

func (k *keptLinker) Link(ctx context.Context, s collective.LinkSetup) (collective.Link, error) {
	l, err := k.Linker.Link(ctx, s)
	k.mu.Lock()
	k.link = l
	k.mu.Unlock()
	return l, err
}

// inPlace is what the collectives ask of a link that can hand received
// bytes over where they landed.
type inPlace interface {
	RecvInPlace(ctx context.Context, peer, n, align int, scratch []byte, fn func([]byte)) (bool, error)
}

// TestRecvInPlaceOverUCX checks that the UCX link hands the ring's
// reduction received bytes where they landed, all of them, in order, in
// whole elements but for a receive's last bytes, and that a receive
// shorter than the message it ends in leaves the rest to the next call;
// over shared memory (UCX_TLS=sm), that it declines.
func TestRecvInPlaceOverUCX(t *testing.T) {
	kept := make([]*keptLinker, 2)
	comms := cluster(t, 2, func(r int, cfg *collective.Config) {
		kept[r] = &keptLinker{Linker: cfg.Link}
		cfg.Link = kept[r]
	})
	// The communicator works over it: a reduction through the in-place
	// receive.
	for r, err := range onAll(comms, func(c *collective.Comm) error {
		data := make([]float32, 300_000)
		for i := range data {
			data[i] = float32(c.Rank() + 1)
		}
		if err := collective.AllReduce(context.Background(), c, data, collective.Sum); err != nil {
			return err
		}
		if data[0] != 3 || data[len(data)-1] != 3 {
			t.Errorf("rank %d: allreduce gave %v, want 3", c.Rank(), data[0])
		}
		return nil
	}) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	ip, ok := kept[0].link.(inPlace)
	if !ok {
		t.Fatalf("the UCX link (%T) does not hand received bytes over in place", kept[0].link)
	}
	ctx := context.Background()
	if over := collective.Over(kept[0].link); over == overSharedMemory {
		// Over shared memory the link declines, and the reduction
		// receives piece by piece.
		ok, err := ip.RecvInPlace(ctx, 1, 4096, 4, make([]byte, 4096), func([]byte) { t.Error("handed bytes over shared memory") })
		if ok || err != nil {
			t.Fatalf("in-place receive over shared memory: ok %v, %v; want declined", ok, err)
		}
		return
	}

	sent := make([]byte, 600_003) // three segments, the last not whole elements
	for i := range sent {
		sent[i] = byte(i * 7)
	}
	sendErr := make(chan error, 1)
	go func() { sendErr <- kept[1].link.Send(ctx, 0, sent) }()
	const align = 4
	scratch := make([]byte, 64<<10)
	var got []byte
	var pieces []int
	// 100,000 bytes first, ending inside the first segment; then the rest.
	for _, n := range []int{100_000, len(sent) - 100_000} {
		ok, err := ip.RecvInPlace(ctx, 1, n, align, scratch, func(b []byte) {
			got = append(got, b...)
			pieces = append(pieces, len(b))
		})
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			// The first receive left part of a segment behind: the
			// caller reads on with Recv.
			rest := make([]byte, n)
			if err := kept[0].link.Recv(ctx, 1, rest); err != nil {
				t.Fatal(err)
			}
			got = append(got, rest...)
			pieces = append(pieces, -n)
		}
	}
	if err := <-sendErr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sent) {
		t.Fatalf("received %d bytes (pieces %v), not the %d sent", len(got), pieces, len(sent))
	}
	if pieces[0] != 100_000 {
		t.Errorf("first receive handed pieces %v, want the 100000 bytes asked for", pieces)
	}
	for i, p := range pieces[:len(pieces)-1] {
		if p > 0 && p%align != 0 {
			t.Errorf("piece %d of %v: %d bytes, not whole elements of %d", i, pieces, p, align)
		}
	}

	// A receive that starts on a segment's boundary is handed over in
	// place, the last piece with the odd bytes.
	recvWhole(t, kept[1].link, ip, sent, align, scratch)
}

// recvWhole sends sent from rank 1 over from and checks that ip, rank
// 0's link, hands all of it over in place in one receive.
func recvWhole(t *testing.T, from collective.Link, ip inPlace, sent []byte, align int, scratch []byte) {
	t.Helper()
	ctx := context.Background()
	sendErr := make(chan error, 1)
	go func() { sendErr <- from.Send(ctx, 0, sent) }()
	var got []byte
	var pieces []int
	ok, err := ip.RecvInPlace(ctx, 1, len(sent), align, scratch, func(b []byte) {
		got = append(got, b...)
		pieces = append(pieces, len(b))
	})
	if err != nil || !ok {
		t.Fatalf("in-place receive of a whole send: ok %v, %v", ok, err)
	}
	if err := <-sendErr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sent) {
		t.Fatalf("received %d bytes in place (pieces %v), not the %d sent", len(got), pieces, len(sent))
	}
}
