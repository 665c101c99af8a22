package check

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/spindle-ml/spindle/collective"
	"github.com/spindle-ml/spindle/rdma/ucx"
)

// Config is one end of a two-host check.
type Config struct {
	// Token is the secret both ends hold (at least MinTokenLen bytes).
	Token string
	// Pings is how many round trips of a small message are timed per link.
	Pings int
	// Bytes is how many bytes each link carries each way for the
	// bandwidth figures, in messages of MessageBytes.
	Bytes, MessageBytes int
	// Timeout bounds connecting, the handshake, and any wait for the
	// other end to make progress.
	Timeout time.Duration
	// Logger receives the links' own lines ("data link is ucx"); nil
	// discards them.
	Logger *slog.Logger
}

// DefaultConfig returns a check that takes a few seconds on a fast
// fabric: 1000 pings and 256 MiB each way in 4 MiB messages per link.
func DefaultConfig() Config {
	return Config{Pings: 1000, Bytes: 256 << 20, MessageBytes: 4 << 20, Timeout: 30 * time.Second}
}

// Bounds of a check, which a peer cannot exceed on the listener.
const (
	maxPings        = 1_000_000
	maxMessageBytes = 1 << 30
	maxBytes        = 64 << 30
)

// Validate reports a bad token or sizes.
func (c Config) Validate() error {
	if err := CheckToken(c.Token); err != nil {
		return err
	}
	if c.Pings < 1 || c.Pings > maxPings || c.MessageBytes < 1 || c.MessageBytes > maxMessageBytes ||
		c.Bytes < c.MessageBytes || c.Bytes > maxBytes || c.Timeout <= 0 {
		return badInput("pings %d, %d bytes in %d-byte messages, timeout %s: want them all positive, at least one message, at most %d pings, %d-byte messages and %d bytes",
			c.Pings, c.Bytes, c.MessageBytes, c.Timeout, maxPings, maxMessageBytes, maxBytes)
	}
	return nil
}

func (c Config) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c.Logger
}

// Result is what one link did between the two hosts.
type Result struct {
	// Link is "tcp" or "ucx".
	Link string `json:"link"`
	// Over is what carried the link's bytes (collective.Over): "tcp",
	// "shared memory" (two processes on one host), "rdma".
	Over string `json:"over,omitempty"`
	// Skipped says why the link was not measured; the figures are then 0.
	Skipped string `json:"skipped,omitempty"`
	// LatencyUS is half the median round trip of a small message.
	LatencyUS float64 `json:"latency_us"`
	// ToListenerGBps and ToPeerGBps are the bandwidth each way, in GB/s.
	ToListenerGBps float64 `json:"to_listener_gbps"`
	ToPeerGBps     float64 `json:"to_peer_gbps"`
}

// String is the result's line in the check's output.
func (r Result) String() string {
	if r.Skipped != "" {
		return fmt.Sprintf("%s link: not measured: %s", r.Link, r.Skipped)
	}
	link := r.Link
	if r.Over != "" {
		link += " link over " + r.Over
	} else {
		link += " link"
	}
	return fmt.Sprintf("%s: latency %.1f us, bandwidth %.3f GB/s to the listener, %.3f GB/s to the peer",
		link, r.LatencyUS, r.ToListenerGBps, r.ToPeerGBps)
}

// hello is what each end tells the other first.
type hello struct {
	Host string `json:"host"`
	// UCX is "" when this end can use UCX, or why not.
	UCX string `json:"ucx_unavailable,omitempty"`
	// Plan is the peer's measurement, which the listener follows.
	Plan *plan `json:"plan,omitempty"`
}

// plan is how much a check measures.
type plan struct {
	Pings        int `json:"pings"`
	Bytes        int `json:"bytes"`
	MessageBytes int `json:"message_bytes"`
}

func myHello() hello {
	h := hello{}
	h.Host, _ = os.Hostname()
	if ok, why := ucx.Available(); !ok {
		h.UCX = why
	}
	return h
}

// message is a line on the control connection.
type message struct {
	Hello  *hello  `json:"hello,omitempty"`
	Phase  string  `json:"phase,omitempty"`
	Result *Result `json:"result,omitempty"`
	Done   bool    `json:"done,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// links are the links a check measures, in order.
var links = []string{"tcp", ucx.Name}

// skipReason says why link cannot run between ends a and b, or "".
func skipReason(link string, a, b hello) string {
	if link != ucx.Name {
		return ""
	}
	for _, h := range []hello{a, b} {
		if h.UCX != "" {
			return fmt.Sprintf("host %s: %s", h.Host, h.UCX)
		}
	}
	return ""
}

// Listener is the listening end of a check: it serves one peer.
type Listener struct {
	cfg Config
	ln  *net.TCPListener
}

// Listen binds addr (":PORT", "host:PORT"; port 0 picks one).
func Listen(addr string, cfg Config) (*Listener, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, badInput("listen on %s: %v", addr, err)
	}
	return &Listener{cfg: cfg, ln: ln.(*net.TCPListener)}, nil
}

// Addr is where the listener listens.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Close stops listening.
func (l *Listener) Close() error { return l.ln.Close() }

// accepted is an authenticated connection.
type accepted struct {
	c           *net.TCPConn
	kind, index byte
}

// Serve waits for one peer, runs its check and returns the peer's host
// and the results. Connections that fail the handshake are logged and
// dropped. The listener is closed when Serve returns.
func (l *Listener) Serve(ctx context.Context) (peer string, results []Result, err error) {
	log := l.cfg.logger()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conns := make(chan accepted)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.acceptLoop(ctx, conns)
	}()
	stop := context.AfterFunc(ctx, func() { l.ln.Close() })
	defer func() {
		stop()
		l.ln.Close()
		cancel()
		wg.Wait()
	}()

	var ctl accepted
	for ctl.c == nil {
		select {
		case a := <-conns:
			if a.kind == kindControl {
				ctl = a
			} else {
				a.c.Close()
			}
		case <-ctx.Done():
			return "", nil, ctx.Err()
		}
	}
	defer ctl.c.Close()
	closeOnCancel := context.AfterFunc(ctx, func() { ctl.c.Close() })
	defer closeOnCancel()
	remote := ctl.c.RemoteAddr().String()
	enc, dec := json.NewEncoder(ctl.c), json.NewDecoder(ctl.c)
	mine := myHello()
	if err := enc.Encode(message{Hello: &mine}); err != nil {
		return remote, nil, fmt.Errorf("talk to the peer at %s: %w", remote, err)
	}
	var m message
	if err := dec.Decode(&m); err != nil || m.Hello == nil {
		return remote, nil, fmt.Errorf("read the hello of the peer at %s: %w", remote, orProtocol(err))
	}
	theirs := *m.Hello
	peer = fmt.Sprintf("%s (%s)", theirs.Host, remote)
	cfg := l.cfg
	if pl := theirs.Plan; pl != nil {
		cfg.Pings, cfg.Bytes, cfg.MessageBytes = pl.Pings, pl.Bytes, pl.MessageBytes
	}
	if err := cfg.Validate(); err != nil {
		return peer, nil, fmt.Errorf("the peer %s asks for: %w", peer, err)
	}
	log.Info("peer connected", "peer", peer)
	for {
		var m message
		if err := dec.Decode(&m); err != nil {
			return peer, results, fmt.Errorf("read from the peer %s: %w", peer, err)
		}
		switch {
		case m.Error != "":
			return peer, results, fmt.Errorf("peer %s: %s", peer, m.Error)
		case m.Done:
			return peer, results, nil
		case m.Result != nil:
			results = append(results, *m.Result)
		case slices.Contains(links, m.Phase):
			if skipReason(m.Phase, mine, theirs) != "" {
				continue
			}
			if err := l.phase(ctx, cfg, m.Phase, conns, peer); err != nil {
				enc.Encode(message{Error: fmt.Sprintf("listener %s: %v", mine.Host, err)})
				return peer, results, err
			}
		default:
			return peer, results, fmt.Errorf("peer %s sent %+v", peer, m)
		}
	}
}

func orProtocol(err error) error {
	if err == nil {
		return errors.New("not a hello")
	}
	return err
}

// acceptLoop authenticates connections and hands them to Serve.
func (l *Listener) acceptLoop(ctx context.Context, out chan<- accepted) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.ln.AcceptTCP()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Serve returning ends a handshake still under way.
			stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
			c.SetDeadline(time.Now().Add(l.cfg.Timeout))
			kind, index, err := acceptHandshake(c, l.cfg.Token)
			if !stop() {
				c.Close() // Serve has returned
				return
			}
			c.SetDeadline(time.Time{})
			if err != nil {
				l.cfg.logger().Warn("rejected a connection", "remote", c.RemoteAddr().String(), "err", err)
				c.Close()
				return
			}
			select {
			case out <- accepted{c: c, kind: kind, index: index}:
			case <-ctx.Done():
				c.Close()
			}
		}()
	}
}

// phase runs the listener's side of one link's measurement.
func (l *Listener) phase(ctx context.Context, cfg Config, link string, conns <-chan accepted, peer string) error {
	streams := make([]*net.TCPConn, 2)
	timer := time.NewTimer(l.cfg.Timeout)
	defer timer.Stop()
	for streams[0] == nil || streams[1] == nil {
		select {
		case a := <-conns:
			if a.kind != kindData || a.index > 1 || streams[a.index] != nil {
				a.c.Close()
				continue
			}
			streams[a.index] = a.c
		case <-timer.C:
			closeAll(streams)
			return fmt.Errorf("the peer %s opened no %s streams in %s", peer, link, l.cfg.Timeout)
		case <-ctx.Done():
			closeAll(streams)
			return ctx.Err()
		}
	}
	// Stream 0 carries the peer's sends, stream 1 this end's.
	s := collective.LinkSetup{Rank: 0, WorldSize: 2, Peers: []string{l.Addr().String(), peer}, Timeout: l.cfg.Timeout,
		Out: []*net.TCPConn{nil, streams[1]}, In: []*net.TCPConn{nil, streams[0]}, Logger: l.cfg.logger()}
	lk, err := linker(link).Link(ctx, s)
	if err != nil {
		return fmt.Errorf("build the %s link to %s: %w", link, peer, err)
	}
	defer lk.Close()
	return serveMeasure(ctx, lk, 1, cfg)
}

func closeAll(cs []*net.TCPConn) {
	for _, c := range cs {
		if c != nil {
			c.Close()
		}
	}
}

// linker builds the links of a check as a job builds them; UCX is
// required and forced, since both ends said they can use it and the
// check measures UCX itself.
func linker(link string) collective.Linker {
	tcp := collective.TCPLinker{SocketBufferBytes: collective.DefaultSocketBufferBytes}
	if link == ucx.Name {
		return ucx.Linker{Spec: collective.LinkSpec{Name: ucx.Name, Required: true, Forced: true, TCP: tcp}}
	}
	return tcp
}

// Dial runs a check against the listener at addr and returns its results.
// A listener that cannot be reached, or holds another token, is bad input.
func Dial(ctx context.Context, addr string, cfg Config) ([]Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, badInput("--peer %q: want HOST:PORT", addr)
	}
	ctl, err := dialData(ctx, addr, cfg, kindControl, 0)
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	closeOnCancel := context.AfterFunc(ctx, func() { ctl.Close() })
	defer closeOnCancel()
	enc, dec := json.NewEncoder(ctl), json.NewDecoder(ctl)
	mine := myHello()
	mine.Plan = &plan{Pings: cfg.Pings, Bytes: cfg.Bytes, MessageBytes: cfg.MessageBytes}
	if err := enc.Encode(message{Hello: &mine}); err != nil {
		return nil, fmt.Errorf("talk to the listener at %s: %w", addr, err)
	}
	var m message
	if err := dec.Decode(&m); err != nil || m.Hello == nil {
		return nil, fmt.Errorf("read the hello of the listener at %s: %w", addr, orProtocol(err))
	}
	theirs := *m.Hello
	listener := fmt.Sprintf("%s (%s)", theirs.Host, addr)
	var results []Result
	for _, link := range links {
		if err := enc.Encode(message{Phase: link}); err != nil {
			return results, fmt.Errorf("talk to the listener %s: %w", listener, err)
		}
		r := Result{Link: link, Skipped: skipReason(link, mine, theirs)}
		if r.Skipped == "" {
			if r, err = dialPhase(ctx, addr, link, cfg); err != nil {
				err = fmt.Errorf("%s link with the listener %s: %w", link, listener, err)
				enc.Encode(message{Error: err.Error()})
				return results, err
			}
		}
		results = append(results, r)
		if err := enc.Encode(message{Result: &r}); err != nil {
			return results, fmt.Errorf("talk to the listener %s: %w", listener, err)
		}
	}
	enc.Encode(message{Done: true})
	return results, nil
}

// dialData connects to the listener and authenticates.
func dialData(ctx context.Context, addr string, cfg Config, kind, index byte) (*net.TCPConn, error) {
	d := net.Dialer{Timeout: cfg.Timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, badInput("cannot reach the listener at %s: %v", addr, err)
	}
	tc := c.(*net.TCPConn)
	tc.SetDeadline(time.Now().Add(cfg.Timeout))
	err = dialHandshake(tc, cfg.Token, kind, index)
	tc.SetDeadline(time.Time{})
	if errors.Is(err, errTokenMismatch) {
		tc.Close()
		return nil, badInput("the listener at %s holds a different token (%s must match on both hosts)", addr, EnvToken)
	}
	if err != nil {
		tc.Close()
		return nil, badInput("handshake with the listener at %s: %v", addr, err)
	}
	return tc, nil
}

// dialPhase runs the peer's side of one link's measurement.
func dialPhase(ctx context.Context, addr, link string, cfg Config) (Result, error) {
	streams := make([]*net.TCPConn, 2)
	for i := range streams {
		c, err := dialData(ctx, addr, cfg, kindData, byte(i))
		if err != nil {
			closeAll(streams)
			return Result{}, err
		}
		streams[i] = c
	}
	s := collective.LinkSetup{Rank: 1, WorldSize: 2, Peers: []string{addr, "peer"}, Timeout: cfg.Timeout,
		Out: []*net.TCPConn{streams[0], nil}, In: []*net.TCPConn{streams[1], nil}, Logger: cfg.logger()}
	lk, err := linker(link).Link(ctx, s)
	if err != nil {
		return Result{}, fmt.Errorf("build the link: %w", err)
	}
	defer lk.Close()
	r, err := measure(ctx, lk, 0, cfg)
	r.Link, r.Over = link, collective.Over(lk)
	return r, err
}

// warmups are untimed round trips before the timed ones.
const warmups = 10

// measure is the peer's side: it times round trips, then sends
// cfg.Bytes and waits for the acknowledgement, then asks for cfg.Bytes
// and receives them.
func measure(ctx context.Context, lk collective.Link, other int, cfg Config) (Result, error) {
	var r Result
	small := make([]byte, 8)
	rtts := make([]time.Duration, cfg.Pings)
	for i := -warmups; i < cfg.Pings; i++ {
		binary.LittleEndian.PutUint64(small, uint64(i))
		start := time.Now()
		if err := lk.Send(ctx, other, small); err != nil {
			return r, fmt.Errorf("ping %d: %w", i, err)
		}
		if err := lk.Recv(ctx, other, small); err != nil {
			return r, fmt.Errorf("pong %d: %w", i, err)
		}
		if i >= 0 {
			rtts[i] = time.Since(start)
		}
	}
	slices.Sort(rtts)
	r.LatencyUS = float64(rtts[len(rtts)/2].Nanoseconds()) / 2000

	buf := make([]byte, cfg.MessageBytes)
	start := time.Now()
	for sent := 0; sent < cfg.Bytes; sent += len(buf) {
		if err := lk.Send(ctx, other, buf[:min(len(buf), cfg.Bytes-sent)]); err != nil {
			return r, fmt.Errorf("send to the listener: %w", err)
		}
	}
	if err := lk.Recv(ctx, other, small); err != nil {
		return r, fmt.Errorf("the listener's acknowledgement: %w", err)
	}
	r.ToListenerGBps = float64(cfg.Bytes) / time.Since(start).Seconds() / 1e9

	start = time.Now()
	if err := lk.Send(ctx, other, small); err != nil {
		return r, fmt.Errorf("ask the listener to send: %w", err)
	}
	for got := 0; got < cfg.Bytes; got += len(buf) {
		if err := lk.Recv(ctx, other, buf[:min(len(buf), cfg.Bytes-got)]); err != nil {
			return r, fmt.Errorf("receive from the listener: %w", err)
		}
	}
	r.ToPeerGBps = float64(cfg.Bytes) / time.Since(start).Seconds() / 1e9
	return r, nil
}

// serveMeasure is the listener's side of measure.
func serveMeasure(ctx context.Context, lk collective.Link, other int, cfg Config) error {
	small := make([]byte, 8)
	for i := -warmups; i < cfg.Pings; i++ {
		if err := lk.Recv(ctx, other, small); err != nil {
			return fmt.Errorf("ping %d: %w", i, err)
		}
		if err := lk.Send(ctx, other, small); err != nil {
			return fmt.Errorf("pong %d: %w", i, err)
		}
	}
	buf := make([]byte, cfg.MessageBytes)
	for got := 0; got < cfg.Bytes; got += len(buf) {
		if err := lk.Recv(ctx, other, buf[:min(len(buf), cfg.Bytes-got)]); err != nil {
			return fmt.Errorf("receive from the peer: %w", err)
		}
	}
	if err := lk.Send(ctx, other, small); err != nil {
		return fmt.Errorf("acknowledge: %w", err)
	}
	if err := lk.Recv(ctx, other, small); err != nil {
		return fmt.Errorf("the peer's request to send: %w", err)
	}
	for sent := 0; sent < cfg.Bytes; sent += len(buf) {
		if err := lk.Send(ctx, other, buf[:min(len(buf), cfg.Bytes-sent)]); err != nil {
			return fmt.Errorf("send to the peer: %w", err)
		}
	}
	return nil
}
