package proxy

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
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/client"
	"github.com/spindle-ml/spindle/ps/pspb"
)

// Sentinel errors of the package.
var (
	// ErrLeft is returned for a call after the worker left the servers:
	// they no longer count its clock, and it cannot come back.
	ErrLeft = errors.New("ps proxy: this worker has left the parameter servers (close was called); no more calls")
	// ErrClosed is returned for a call after the proxy was closed.
	ErrClosed = errors.New("ps proxy: closed")
)

// socketBufferBytes is the kernel buffer of each end of a connection.
const socketBufferBytes = 4 << 20

// Config says where a proxy listens and how it reaches the servers.
type Config struct {
	// Path is the Unix socket to serve on. Its directory should be
	// private to the executor's user; the socket is made mode 0600.
	Path string
	// Connect makes the client the proxy forwards to. It is called on the
	// first call that needs the servers, and again after a failure.
	Connect func() (*client.Client, error)
	Logger  *slog.Logger
}

// Validate checks cfg.
func (cfg Config) Validate() error {
	switch {
	case cfg.Path == "":
		return errors.New("ps proxy: no socket path")
	case cfg.Connect == nil:
		return errors.New("ps proxy: no way to connect to the servers")
	}
	return nil
}

// Proxy forwards a training process's calls on a Unix socket to the
// job's parameter servers.
type Proxy struct {
	cfg Config
	ln  net.Listener
	log *slog.Logger

	// sessionMu serializes Clock and Leave, which the client takes one
	// at a time, and the client's creation.
	sessionMu sync.Mutex

	mu     sync.Mutex
	client *client.Client
	dims   map[string]int // tables declared through this proxy
	left   bool
	closed bool
	conns  map[net.Conn]struct{}
}

// New listens on cfg.Path, readable and writable by this user only.
func New(cfg Config) (*Proxy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	_ = os.Remove(cfg.Path) // a leftover of an earlier run in the same directory
	ln, err := net.Listen("unix", cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("ps proxy: listen on %s: %w", cfg.Path, err)
	}
	if err := os.Chmod(cfg.Path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("ps proxy: make %s private: %w", cfg.Path, err)
	}
	return &Proxy{cfg: cfg, ln: ln, log: cfg.Logger.With("component", "ps-proxy"),
		dims: make(map[string]int), conns: make(map[net.Conn]struct{})}, nil
}

// Path is the socket the proxy serves on.
func (p *Proxy) Path() string { return p.cfg.Path }

// Run serves connections until ctx ends, then closes them and waits for
// their goroutines. Calls under way are cancelled with ctx.
func (p *Proxy) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		p.ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("ps proxy: accept on %s: %w", p.cfg.Path, err)
		}
		p.mu.Lock()
		if ctx.Err() != nil {
			p.mu.Unlock()
			conn.Close()
			return nil
		}
		p.conns[conn] = struct{}{}
		p.mu.Unlock()
		if uc, ok := conn.(*net.UnixConn); ok {
			// A pull's rows cross in a few large writes rather than many
			// small ones, each a wake-up of the other process.
			_ = uc.SetWriteBuffer(socketBufferBytes)
			_ = uc.SetReadBuffer(socketBufferBytes)
		}
		wg.Go(func() {
			defer func() {
				p.mu.Lock()
				delete(p.conns, conn)
				p.mu.Unlock()
				conn.Close()
			}()
			p.serve(ctx, conn)
		})
	}
}

// serve answers conn's requests, one at a time, until it closes.
func (p *Proxy) serve(ctx context.Context, conn net.Conn) {
	var buf []byte
	for {
		body, err := readFrame(conn, buf)
		if err != nil {
			if errors.Is(err, errFrameTooLarge) {
				// The rest of the frame is unread: say why, then hang up.
				_ = writeReply(conn, statusError, []byte(err.Error()))
			} else if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				p.log.Debug("connection ended mid-request", "err", err)
			}
			return
		}
		buf = body[:cap(body)]
		parts, err := p.handle(ctx, body[0], body[1:])
		if err != nil {
			p.log.Debug("call failed", "op", body[0], "err", err)
			err = writeReply(conn, statusError, []byte(err.Error()))
		} else {
			err = writeReply(conn, statusOK, parts...)
		}
		if err != nil {
			return
		}
	}
}

// handle runs one request and returns its reply's body.
func (p *Proxy) handle(ctx context.Context, op byte, body []byte) ([][]byte, error) {
	switch op {
	case opDeclare:
		return nil, p.declare(ctx, body)
	case opPull:
		return p.pull(ctx, body)
	case opPush:
		return nil, p.push(ctx, body)
	case opClock:
		return p.clock(ctx)
	case opStats:
		return p.stats(ctx)
	case opLeave:
		return nil, p.Leave(ctx)
	case opBarrier:
		return nil, p.barrier(ctx)
	case opExport:
		return p.export(ctx, body)
	}
	return nil, fmt.Errorf("ps proxy: unknown op %d (want 1 to 8: declare, pull, push, clock, stats, leave, barrier, export)", op)
}

func (p *Proxy) barrier(ctx context.Context) error {
	c, err := p.session()
	if err != nil {
		return err
	}
	return c.Barrier(ctx)
}

// export writes a table to one Parquet file at a URI (a path or
// hdfs://), with the Hadoop settings of the executor's environment.
func (p *Proxy) export(ctx context.Context, body []byte) ([][]byte, error) {
	r := reader{b: body}
	table := r.name()
	uri := string(r.rest())
	if r.err != nil {
		return nil, fmt.Errorf("export: %w", r.err)
	}
	if uri == "" {
		return nil, fmt.Errorf("export table %s: no file to write", table)
	}
	if _, err := p.dim(table); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	c, err := p.session()
	if err != nil {
		return nil, err
	}
	files := fsys.NewResolver(fsys.Options{})
	defer files.Close()
	rows, err := c.ExportParquet(ctx, table, uri, files)
	if err != nil {
		return nil, err
	}
	return [][]byte{binary.LittleEndian.AppendUint64(nil, uint64(rows))}, nil
}

// session returns the client, making it on first use.
func (p *Proxy) session() (*client.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return nil, ErrClosed
	case p.left:
		return nil, ErrLeft
	case p.client != nil:
		return p.client, nil
	}
	c, err := p.cfg.Connect()
	if err != nil {
		return nil, fmt.Errorf("ps proxy: connect to the parameter servers: %w", err)
	}
	p.log.Info("connected to the parameter servers", "servers", c.Servers(), "worker", c.Worker())
	p.client = c
	return c, nil
}

// dim returns the dim of a table declared through this proxy.
func (p *Proxy) dim(table string) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, ok := p.dims[table]
	if !ok {
		return 0, fmt.Errorf("table %q: declare it first (every worker declares the tables it uses)", table)
	}
	return d, nil
}

func (p *Proxy) declare(ctx context.Context, body []byte) error {
	spec := &pspb.TableSpec{}
	if err := protojson.Unmarshal(body, spec); err != nil {
		return fmt.Errorf("declare: read table spec %s: %w", preview(body), err)
	}
	c, err := p.session()
	if err != nil {
		return err
	}
	// The client checks the spec (ps.Normalize) before sending it.
	if err := c.Declare(ctx, spec); err != nil {
		return err
	}
	p.mu.Lock()
	p.dims[spec.Name] = int(spec.Dim)
	p.mu.Unlock()
	return nil
}

func (p *Proxy) pull(ctx context.Context, body []byte) ([][]byte, error) {
	r := reader{b: body}
	table := r.name()
	raw := r.rest()
	if r.err != nil {
		return nil, fmt.Errorf("pull: %w", r.err)
	}
	keys, err := ps.BytesKeys(raw)
	if err != nil {
		return nil, fmt.Errorf("pull table %s: %w", table, err)
	}
	dim, err := p.dim(table)
	if err != nil {
		return nil, fmt.Errorf("pull: %w", err)
	}
	c, err := p.session()
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(keys)*dim)
	if err := c.Pull(ctx, table, keys, out); err != nil {
		return nil, err
	}
	hdr := binary.LittleEndian.AppendUint32(nil, uint32(dim))
	return [][]byte{hdr, ps.FloatBytes(out)}, nil
}

func (p *Proxy) push(ctx context.Context, body []byte) error {
	r := reader{b: body}
	table := r.name()
	n := r.uint32("key count")
	rawKeys := r.take(8*n, fmt.Sprintf("%d keys", n))
	rawGrads := r.rest()
	if r.err != nil {
		return fmt.Errorf("push: %w; nothing applied", r.err)
	}
	dim, err := p.dim(table)
	if err != nil {
		return fmt.Errorf("push: %w; nothing applied", err)
	}
	if len(rawGrads) != n*dim*4 {
		return fmt.Errorf("push %d keys of table %s (dim %d) with %d bytes of gradients: want %d (%d float32s); nothing applied",
			n, table, dim, len(rawGrads), n*dim*4, n*dim)
	}
	keys, err := ps.BytesKeys(rawKeys)
	if err != nil {
		return fmt.Errorf("push table %s: %w; nothing applied", table, err)
	}
	grads, err := ps.BytesFloats(rawGrads)
	if err != nil {
		return fmt.Errorf("push table %s: %w; nothing applied", table, err)
	}
	c, err := p.session()
	if err != nil {
		return err
	}
	return c.Push(ctx, table, keys, grads)
}

func (p *Proxy) clock(ctx context.Context) ([][]byte, error) {
	p.sessionMu.Lock()
	defer p.sessionMu.Unlock()
	c, err := p.session()
	if err != nil {
		return nil, err
	}
	if err := c.Clock(ctx); err != nil {
		return nil, err
	}
	return [][]byte{binary.LittleEndian.AppendUint64(nil, uint64(c.Steps()))}, nil
}

// Stats is the JSON body of a stats reply.
type Stats struct {
	// Worker is this process's worker index; Clock its finished steps.
	Worker  int           `json:"worker"`
	Clock   int64         `json:"clock"`
	Servers []ServerStats `json:"servers"`
}

// ServerStats is one server's statistics.
type ServerStats struct {
	Server int          `json:"server"`
	Tables []TableStats `json:"tables"`
	// Clocks are the workers' clocks as the server knows them (-1: left).
	Clocks []int64 `json:"clocks"`
}

// TableStats is one server's part of a table.
type TableStats struct {
	Name   string `json:"name"`
	Keys   uint64 `json:"keys"`
	Bytes  uint64 `json:"bytes"`
	Pushes uint64 `json:"pushes"`
	Pulls  uint64 `json:"pulls"`
}

func (p *Proxy) stats(ctx context.Context) ([][]byte, error) {
	c, err := p.session()
	if err != nil {
		return nil, err
	}
	per, err := c.Stats(ctx)
	if err != nil {
		return nil, err
	}
	out := Stats{Worker: c.Worker(), Clock: c.Steps(), Servers: make([]ServerStats, len(per))}
	for i, s := range per {
		// (nil for a server out of the ring)
		ss := ServerStats{Server: i, Clocks: s.GetClocks(), Tables: []TableStats{}}
		for _, t := range s.GetTables() {
			ss.Tables = append(ss.Tables, TableStats{Name: t.Name, Keys: t.Keys, Bytes: t.Bytes, Pushes: t.Pushes, Pulls: t.Pulls})
		}
		slices.SortFunc(ss.Tables, func(a, b TableStats) int { return strings.Compare(a.Name, b.Name) })
		out.Servers[i] = ss
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("ps proxy: encode statistics: %w", err)
	}
	return [][]byte{b}, nil
}

// Leave tells the servers this worker is done, so that no one waits for
// its clock, and closes the proxy's connections to them. The process
// asks for it (its client's close); the executor does it for a process
// that ended well without asking. A second Leave does nothing.
func (p *Proxy) Leave(ctx context.Context) error {
	p.sessionMu.Lock()
	defer p.sessionMu.Unlock()
	p.mu.Lock()
	done := p.left
	p.mu.Unlock()
	if done {
		return nil
	}
	c, err := p.session()
	if err != nil {
		return err
	}
	err = c.Close(ctx)
	p.mu.Lock()
	p.left, p.client = true, nil
	p.mu.Unlock()
	if err != nil {
		return fmt.Errorf("ps proxy: leave: %w", err)
	}
	p.log.Debug("left the parameter servers", "worker", c.Worker(), "clock", c.Steps())
	return nil
}

// Close stops listening, removes the socket and drops the connections to
// the servers without leaving: the servers keep this worker's clock where
// it stopped, as for a Go worker that died. Call Leave first when the
// process ended well. Calls that come after Close fail with ErrClosed.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	_ = os.Remove(p.cfg.Path)
	p.mu.Lock()
	c := p.client
	p.client, p.closed = nil, true
	p.mu.Unlock()
	if c != nil {
		c.Abandon()
	}
	return err
}

// preview quotes the start of b for an error message.
func preview(b []byte) string {
	const max = 80
	if len(b) > max {
		return fmt.Sprintf("%q...", b[:max])
	}
	return fmt.Sprintf("%q", b)
}
