package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// Mode is what the proxy does to the bytes it carries.
type Mode int

// Modes.
const (
	// Pass forwards bytes both ways.
	Pass Mode = iota
	// Pause holds bytes until the mode is Pass again; connections stay open.
	Pause
	// Blackhole throws bytes away; connections stay open (the peer hears
	// nothing) until the mode changes, when they are cut.
	Blackhole
	// Drop cuts every connection and every new one at once.
	Drop
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Pause:
		return "pause"
	case Blackhole:
		return "blackhole"
	case Drop:
		return "drop"
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// LossRTO is how long a chunk "lost" by SetLoss is held back: TCP carries
// every byte in the end, so a lost segment shows as a retransmission
// timeout (Linux's minimum is 200 ms).
const LossRTO = 200 * time.Millisecond

// Proxy forwards TCP connections from its address to a target.
type Proxy struct {
	ln     net.Listener
	target string

	mu   sync.Mutex
	cond *sync.Cond
	mode Mode
	// up and down are the modes of the bytes from the clients to the
	// target alone (SetToTarget) and back (SetToClient), in force while
	// mode is Pass.
	up, down Mode
	delay    time.Duration
	loss     float64
	rng      *rand.Rand
	conns    map[net.Conn]struct{}

	wg sync.WaitGroup
}

// New listens on listen (host:port; port 0 picks one) for connections to
// forward to target.
func New(listen, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("fault proxy: listen on %s: %w", listen, err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	return p, nil
}

// Addr is where the proxy listens.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Mode returns the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Set changes the mode of both directions (and ends a one-way mode).
// Leaving Blackhole and entering Drop cut the connections open now.
func (p *Proxy) Set(m Mode) {
	p.mu.Lock()
	old := p.worst()
	p.mode, p.up, p.down = m, Pass, Pass
	p.changed(old, m)
}

// SetToTarget changes the mode of the bytes from the proxy's clients to
// its target only, the other way passing: SetToTarget(Blackhole) is a
// one-way partition. Pass ends it.
func (p *Proxy) SetToTarget(m Mode) {
	p.mu.Lock()
	old := p.worst()
	p.mode, p.up, p.down = Pass, m, Pass
	p.changed(old, m)
}

// SetToClient is SetToTarget for the bytes from the target back to the
// clients.
func (p *Proxy) SetToClient(m Mode) {
	p.mu.Lock()
	old := p.worst()
	p.mode, p.up, p.down = Pass, Pass, m
	p.changed(old, m)
}

// worst is Blackhole when either direction is blackholed, else the
// both-ways mode; p.mu is held.
func (p *Proxy) worst() Mode {
	if p.up == Blackhole || p.down == Blackhole {
		return Blackhole
	}
	return p.mode
}

// SetDelay holds every chunk of bytes, both ways, for d before passing it
// on (0 ends the delay): a slow link.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// SetLoss makes each chunk of bytes, both ways, "lost" with probability
// loss: held back for LossRTO, as TCP's retransmission delays a lost
// segment. The choices follow seed, so a run can be replayed. 0 ends it.
func (p *Proxy) SetLoss(loss float64, seed uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loss, p.rng = loss, rand.New(rand.NewPCG(seed, 2))
}

// effective is the mode of one direction; p.mu is held.
func (p *Proxy) effective(up bool) Mode {
	switch {
	case p.mode != Pass:
		return p.mode
	case up:
		return p.up
	default:
		return p.down
	}
}

// changed cuts what a change from old to m cuts, and wakes paused pumps;
// it unlocks p.mu.
func (p *Proxy) changed(old, m Mode) {
	var cut []net.Conn
	if m == Drop || (old == Blackhole && m != Blackhole) {
		for c := range p.conns {
			cut = append(cut, c)
		}
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	for _, c := range cut {
		_ = c.Close()
	}
}

// Serve accepts and forwards connections until ctx ends, then closes
// every connection and waits for its goroutines.
func (p *Proxy) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { _ = p.ln.Close() })
	defer stop()
	defer p.wg.Wait()
	defer p.closeAll()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("fault proxy: accept: %w", err)
		}
		if p.Mode() == Drop {
			_ = c.Close()
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.forward(ctx, c)
		}()
	}
}

func (p *Proxy) closeAll() {
	p.mu.Lock()
	p.mode = Drop
	for c := range p.conns {
		_ = c.Close()
	}
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == Drop {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// forward carries one connection both ways.
func (p *Proxy) forward(ctx context.Context, client net.Conn) {
	var d net.Dialer
	server, err := d.DialContext(ctx, "tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(client) || !p.track(server) {
		_ = client.Close()
		_ = server.Close()
		p.untrack(client)
		return
	}
	defer p.untrack(client)
	defer p.untrack(server)
	var wg sync.WaitGroup
	wg.Add(2)
	pump := func(dst, src net.Conn, up bool) {
		defer wg.Done()
		p.pump(dst, src, up)
		// One way ended: end both, as a cut link would.
		_ = dst.Close()
		_ = src.Close()
	}
	go pump(server, client, true)
	go pump(client, server, false)
	wg.Wait()
}

// pump copies src to dst through the mode's gate; up says the bytes go
// from the client to the target.
func (p *Proxy) pump(dst, src net.Conn, up bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.effective(up) == Pause {
				p.cond.Wait()
			}
			m := p.effective(up)
			hold := p.delay
			if p.loss > 0 && p.rng.Float64() < p.loss {
				hold += LossRTO
			}
			p.mu.Unlock()
			if hold > 0 {
				time.Sleep(hold) // the fault: the link holds these bytes
			}
			switch m {
			case Drop:
				return
			case Blackhole:
				// Gone; the peer hears nothing.
			default:
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return // io.EOF or a cut connection: either ends the pump
		}
	}
}
