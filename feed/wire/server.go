package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/spindle-ml/spindle/feed"
)

// MetaEpoch is the Arrow schema metadata key that carries the epoch
// number of an arrow-mode stream ("-1" for the stream after the last epoch).
const MetaEpoch = "spindle.epoch"

// EpochSource hands out one reader per epoch over the same schema. The
// feed pipeline (feed.Pipeline) is one.
type EpochSource interface {
	// Schema is the schema of every batch of every epoch.
	Schema() *arrow.Schema
	// Epoch opens epoch number epoch (0-based) of this rank's data.
	Epoch(ctx context.Context, epoch int) (feed.Reader, error)
}

// ServerConfig configures a Server.
type ServerConfig struct {
	// SocketPath is where the Unix socket is created. An old socket left
	// there by a previous run is replaced; any other file is an error.
	SocketPath string
	// Mode is ModeArrow or ModeTensor.
	Mode Mode
	// Epochs is the number of epochs to serve before serving empty streams.
	Epochs int
	// StartEpoch and StartBatch are where serving starts, to resume from a
	// checkpoint: the first connection receives epoch StartEpoch without
	// its first StartBatch batches, which are read and dropped (an epoch
	// is the same for the same settings, so no row is sent twice or
	// skipped); epochs before StartEpoch are never served.
	StartEpoch int
	StartBatch int64
	// Source opens each epoch.
	Source EpochSource
	// LabelColumn is, in tensor mode, the column sent as the label vector;
	// empty sends features only. Arrow mode sends every column as is.
	LabelColumn string
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// SharedMemory also listens at SharedMemoryPath(SocketPath), where
	// clients (DialArrow, DialTensor, the Python package) receive each
	// epoch through a shared-memory region instead of the socket (see
	// shm.go). The two sockets share one sequence of epochs. It is
	// skipped, with a log line, when that path is too long for a socket.
	SharedMemory bool
	// SharedRegion, with SharedMemory, is the region to use, made before
	// the pipeline that decodes batches into it (NewSharedRegion); nil
	// makes one on first use. The server does not close it.
	SharedRegion *SharedRegion
}

// maxSocketPath is the longest path a Unix socket address holds
// (sizeof(sun_path) minus the terminating NUL on Linux).
const maxSocketPath = 107

// Validate reports the first problem with the configuration.
func (c ServerConfig) Validate() error {
	switch {
	case c.SocketPath == "":
		return errors.New("feed server: no socket path")
	case len(c.SocketPath) > maxSocketPath:
		return fmt.Errorf("feed server: socket path %s is %d bytes long; Unix sockets allow at most %d (use a shorter work directory)",
			c.SocketPath, len(c.SocketPath), maxSocketPath)
	case !c.Mode.streams():
		return fmt.Errorf("feed server: mode %q does not stream over a socket (want %s or %s)", c.Mode, ModeArrow, ModeTensor)
	case c.Epochs < 1:
		return fmt.Errorf("feed server: %d epochs; need at least 1", c.Epochs)
	case c.StartEpoch < 0 || c.StartBatch < 0:
		return fmt.Errorf("feed server: start at epoch %d batch %d: must not be negative", c.StartEpoch, c.StartBatch)
	case c.Source == nil:
		return errors.New("feed server: no epoch source")
	case c.Source.Schema() == nil:
		return errors.New("feed server: epoch source has no schema")
	}
	if c.Mode == ModeTensor {
		if err := CheckTensorSchema(c.Source.Schema(), c.LabelColumn); err != nil {
			return fmt.Errorf("feed server: %w", err)
		}
	}
	return nil
}

// Stats is a snapshot of what a Server has sent, for progress reports.
type Stats struct {
	// Epoch is the epoch being served, or the last one served; -1 before
	// the first connection.
	Epoch int
	// EpochsServed counts the epochs whose stream has ended, read to the
	// end or abandoned by the consumer.
	EpochsServed int
	// Rows, Batches and Bytes total what was sent over every epoch: written
	// to the socket or the shared memory, which includes what waits there
	// for the consumer (read-ahead).
	Rows, Batches, Bytes int64
	// TakenRows and TakenBatches total what the consumer has read off the
	// socket: the training process's own progress. A batch counts once
	// the consumer has read its last byte (see takenTracker).
	TakenRows, TakenBatches int64
}

// Server feeds one training process over a Unix socket. Connection k
// receives epoch StartEpoch+k; connections are served one at a time, in order; after
// the last epoch every connection receives an empty stream with epoch -1.
type Server struct {
	cfg    ServerConfig
	log    *slog.Logger
	ln     *net.UnixListener
	sockFI fs.FileInfo // the socket file as created, to remove only our own
	tensor *tensorEncoder
	vw     *vecWriter        // arrow mode, reused from connection to connection
	lnShm  *net.UnixListener // nil without shared memory
	shmFI  fs.FileInfo
	shm    shmStreams // with SharedMemory

	closeOnce sync.Once
	closeErr  error
	running   atomic.Bool

	epoch        atomic.Int64
	epochsServed atomic.Int64
	rows         atomic.Int64
	batches      atomic.Int64
	bytes        atomic.Int64 // written to sockets
	shmBytes     atomic.Int64 // of messages in shared memory (a batch sent in place counts its buffers)
	shmInline    atomic.Int64 // messages of shared-memory streams sent inline
	shmInPlace   atomic.Int64 // batches of shared-memory streams sent where they lie (writeInPlace)
	shmWaitedOut atomic.Int64 // waits for room in the region that ran out (the client held it)
	shmHolds     atomic.Int64 // 'H' frames sent: held ends that waited for the client
	taken        takenTracker
}

// socketBufferBytes is the socket buffer size asked for on both ends of a
// connection (the kernel caps it at net.core.wmem_max and rmem_max). A
// large send buffer lets the consumer keep reading while the server
// prepares the next batch.
const socketBufferBytes = 4 << 20

// NewServer validates cfg and creates the socket, readable and writable
// by the owner only, so the training process may connect as soon as
// NewServer returns; connections wait until Run serves them.
func NewServer(cfg ServerConfig) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("component", "feed", "mode", string(cfg.Mode), "socket", cfg.SocketPath)
	s.shm = shmStreams{size: shmRegionBytes, log: s.log}
	if cfg.SharedRegion != nil {
		s.shm.region, s.shm.tried, s.shm.borrowed = cfg.SharedRegion.r, true, true
	}
	s.epoch.Store(-1)
	s.taken.written = s.bytes.Load
	if cfg.Mode == ModeTensor {
		enc, err := newTensorEncoder(cfg.Source.Schema(), cfg.LabelColumn)
		if err != nil {
			return nil, fmt.Errorf("feed server: %w", err)
		}
		s.tensor = enc
	}
	ln, fi, err := listenPrivate(cfg.SocketPath, ".sf")
	if err != nil {
		return nil, err
	}
	s.ln, s.sockFI = ln, fi
	if cfg.SharedMemory {
		path := SharedMemoryPath(cfg.SocketPath)
		if len(path) > maxSocketPath {
			s.log.Info("no shared-memory feed socket: its path is too long", "path", path)
			return s, nil
		}
		if s.lnShm, s.shmFI, err = listenPrivate(path, ".sm"); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// listenPrivate creates a Unix socket at path that only the owner may
// connect to. The socket is bound under a temporary name, made private,
// then renamed into place, so no other user can ever connect to it.
func listenPrivate(path, tmpPrefix string) (*net.UnixListener, fs.FileInfo, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, nil, fmt.Errorf("feed server: %s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, nil, fmt.Errorf("feed server: remove old socket: %w", err)
		}
	}
	tmp := filepath.Join(filepath.Dir(path), fmt.Sprintf("%s%d", tmpPrefix, os.Getpid()))
	if len(tmp) > maxSocketPath {
		return nil, nil, fmt.Errorf("feed server: socket directory %s is too long for a Unix socket", filepath.Dir(path))
	}
	_ = os.Remove(tmp) // a leftover of a crashed process with our pid
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, nil, fmt.Errorf("feed server: listen on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false)
	fail := func(err error) (*net.UnixListener, fs.FileInfo, error) {
		_ = ln.Close()
		_ = os.Remove(tmp)
		return nil, nil, err
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fail(fmt.Errorf("feed server: make socket %s private: %w", path, err))
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(fmt.Errorf("feed server: create socket %s: %w", path, err))
	}
	fi, err := os.Lstat(path)
	if err != nil {
		_ = ln.Close()
		return nil, nil, fmt.Errorf("feed server: create socket %s: %w", path, err)
	}
	return ln, fi, nil
}

// Close stops listening and removes the socket. Run calls it on return;
// call it yourself only when Run is never called.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = closeListener(s.ln, s.cfg.SocketPath, s.sockFI)
		if s.lnShm != nil {
			if err := closeListener(s.lnShm, SharedMemoryPath(s.cfg.SocketPath), s.shmFI); s.closeErr == nil {
				s.closeErr = err
			}
		}
	})
	return s.closeErr
}

// closeListener stops listening and removes the socket file at path if
// it is still the one created (fi).
func closeListener(ln *net.UnixListener, path string, fi fs.FileInfo) error {
	err := ln.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	if now, lerr := os.Lstat(path); lerr == nil && os.SameFile(now, fi) {
		if rerr := os.Remove(path); rerr != nil && err == nil {
			err = fmt.Errorf("feed server: remove socket: %w", rerr)
		}
	}
	return err
}

// Stats returns what the server has sent so far. It is safe to call
// concurrently with Run.
func (s *Server) Stats() Stats {
	takenRows, takenBatches := s.taken.taken()
	return Stats{
		TakenRows:    takenRows,
		TakenBatches: takenBatches,
		Epoch:        int(s.epoch.Load()),
		EpochsServed: int(s.epochsServed.Load()),
		Rows:         s.rows.Load(),
		Batches:      s.batches.Load(),
		Bytes:        s.bytes.Load() + s.shmBytes.Load(),
	}
}

// Run serves connections until ctx is done, then closes the server and
// returns nil. It returns an error when the source fails to produce an
// epoch; the consumer's stream is then cut so that it sees an error, not a
// short epoch. A consumer that disconnects mid-epoch is not an error: the
// epoch counts as served (a process may stop an epoch early on purpose)
// and the next connection gets the next epoch.
func (s *Server) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("feed server: Run called twice")
	}
	defer s.Close()
	accepted := make(chan accepted)
	done := make(chan struct{})
	var acceptors sync.WaitGroup
	for _, ln := range []*net.UnixListener{s.ln, s.lnShm} {
		if ln == nil {
			continue
		}
		acceptors.Add(1)
		go func() {
			defer acceptors.Done()
			s.acceptLoop(ln, ln == s.lnShm, accepted, done)
		}()
	}
	defer func() {
		close(done)
		s.Close() // ends the accept loops
		acceptors.Wait()
		s.shm.close()
	}()
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()

	for k := 0; ; k++ {
		epoch := -1
		var r feed.Reader
		if e := s.cfg.StartEpoch + k; e < s.cfg.Epochs {
			// Open the epoch before the process asks for it so that the
			// source's read-ahead runs while the process is busy elsewhere.
			epoch = e
			var err error
			if r, err = s.cfg.Source.Epoch(ctx, epoch); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("feed server: open epoch %d: %w", epoch, err)
			}
			if k == 0 && s.cfg.StartBatch > 0 {
				r = &skipReader{Reader: r, skip: s.cfg.StartBatch}
			}
		}
		a := <-accepted
		if a.err != nil {
			if r != nil {
				_ = r.Close()
			}
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("feed server: accept on %s: %w", s.cfg.SocketPath, a.err)
		}
		if err := s.serve(ctx, a.conn, a.shm, epoch, r); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// accepted is a connection from one of the server's sockets, or the
// error that ended listening.
type accepted struct {
	conn *net.UnixConn
	shm  bool // from the shared-memory socket
	err  error
}

// acceptLoop accepts connections on ln and hands them to Run until done
// is closed or ln fails (closed by Close); the failure goes to Run too.
func (s *Server) acceptLoop(ln *net.UnixListener, shm bool, out chan<- accepted, done <-chan struct{}) {
	for {
		conn, err := ln.AcceptUnix()
		select {
		case out <- accepted{conn: conn, shm: shm, err: err}:
		case <-done:
			if conn != nil {
				_ = conn.Close()
			}
			return
		}
		if err != nil {
			return
		}
	}
}

// consumerError marks a failure to write to the consumer.
type consumerError struct{ err error }

func (e *consumerError) Error() string { return e.err.Error() }
func (e *consumerError) Unwrap() error { return e.err }

// serve sends one epoch (or, with a nil reader, the empty stream) over
// conn and closes both.
func (s *Server) serve(ctx context.Context, conn *net.UnixConn, shm bool, epoch int, r feed.Reader) error {
	kept := false // the shm streams close it
	defer func() {
		if !kept {
			conn.Close()
		}
	}()
	if r != nil {
		defer func() {
			if err := r.Close(); err != nil {
				s.log.Warn("close epoch reader", "epoch", epoch, "err", err)
			}
		}()
		s.epoch.Store(int64(epoch))
	}
	s.taken.begin(conn)
	defer s.taken.end() // before the close deferred above
	// Unblock a write to a consumer that stopped reading when ctx ends.
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	_ = conn.SetWriteBuffer(socketBufferBytes)

	start := time.Now()
	rows0, batches0, bytes0 := s.rows.Load(), s.batches.Load(), s.bytes.Load()+s.shmBytes.Load()
	inPlace0 := s.shmInPlace.Load()
	var err error
	switch {
	case shm && s.cfg.Mode == ModeTensor:
		kept, err = s.serveTensorShm(ctx, conn, epoch, r)
	case shm:
		kept, err = s.serveArrowShm(ctx, conn, epoch, r)
	case s.cfg.Mode == ModeTensor:
		err = s.serveTensor(ctx, &countingWriter{w: conn, n: &s.bytes}, epoch, r)
	default:
		err = s.serveArrow(ctx, conn, epoch, r)
	}
	// Whether the failure is ours to report or the effect of stopping:
	// decided now, before closing the connection lets the consumer react.
	stopping := ctx.Err() != nil
	if kept {
		_ = conn.CloseWrite()
	}
	if r == nil {
		if err != nil {
			s.log.Debug("consumer left before the end of the empty stream", "err", err)
		}
		return nil
	}
	attrs := []any{"epoch", epoch,
		"rows", s.rows.Load() - rows0, "batches", s.batches.Load() - batches0,
		"bytes", s.bytes.Load() + s.shmBytes.Load() - bytes0, "shared_memory", shm,
		"batches_in_place", s.shmInPlace.Load() - inPlace0,
		"duration", time.Since(start).Round(time.Millisecond)}
	var ce *consumerError
	switch {
	case err == nil:
		s.epochsServed.Add(1)
		s.log.Debug("epoch served", attrs...)
		return nil
	case stopping:
		return nil
	case errors.As(err, &ce):
		s.epochsServed.Add(1)
		s.log.Warn("consumer disconnected mid-epoch; counting the epoch as served", append(attrs, "err", ce.err)...)
		return nil
	}
	return fmt.Errorf("feed server: epoch %d: %w", epoch, err)
}

// countingWriter counts bytes sent and marks write errors as the consumer's.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	if err != nil {
		return n, &consumerError{err}
	}
	return n, nil
}

// abortMarker cuts an arrow stream: a continuation token with no message
// length after it, so every IPC reader fails with an unexpected end of
// stream instead of taking the cut for a clean end.
var abortMarker = []byte{0xff, 0xff, 0xff, 0xff}

func (s *Server) serveArrow(ctx context.Context, conn *net.UnixConn, epoch int, r feed.Reader) error {
	if s.vw == nil {
		s.vw = newVecWriter(nil, &s.bytes)
	}
	vw := s.vw
	vw.conn = conn
	defer func() {
		vw.reset()
		vw.conn = nil
	}()
	iw := newArrowWriter(vw, withEpoch(s.cfg.Source.Schema(), epoch))
	fail := func(err error) error {
		var ce *consumerError
		if !errors.As(err, &ce) {
			vw.abort()
		}
		return err
	}
	if r != nil {
		// Messages gather into one writev while the source has batches
		// ready; when it has none, what is queued goes out at once, so that
		// a slow source never keeps the consumer from a batch it could
		// have.
		ready, _ := r.(bufferedReader)
		for {
			rec, err := r.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fail(fmt.Errorf("read batch: %w", err))
			}
			rows := rec.NumRows()
			vw.hold(rec) // until the writev that sends it
			if err := iw.Write(rec); err != nil {
				return fail(err)
			}
			if ready == nil || ready.Buffered() == 0 {
				if err := vw.Flush(); err != nil {
					return err
				}
			}
			s.rows.Add(rows)
			s.batches.Add(1)
			// The batch ends where the stream written and queued ends.
			s.taken.sent(s.bytes.Load()+int64(vw.queued), rows)
		}
	}
	return iw.Close()
}

// bufferedReader is a feed.Reader that tells how many batches it has
// ready (feed.Pipeline's epochs do).
type bufferedReader interface {
	Buffered() int
}

// tensorFrame is a converted batch on its way to the socket.
type tensorFrame struct {
	buf  []float32 // backing store of data, returned for reuse
	data []byte
	rows int64
}

// serveTensor converts batches on this goroutine and writes them on
// another, so that converting batch k+1 overlaps sending batch k. Two
// frame buffers circulate between them.
func (s *Server) serveTensor(ctx context.Context, w io.Writer, epoch int, r feed.Reader) error {
	if _, err := w.Write(s.tensor.header(epoch)); err != nil {
		return err
	}
	end := make([]byte, 4) // a zero row count ends the epoch
	if r == nil {
		_, err := w.Write(end)
		return err
	}
	frames := make(chan tensorFrame)
	spare := make(chan []float32, 2)
	spare <- nil
	spare <- nil
	complete := false // set before frames closes when every batch was converted
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		for f := range frames {
			if _, err := w.Write(f.data); err != nil {
				return err
			}
			s.rows.Add(f.rows)
			s.batches.Add(1)
			s.taken.sent(s.bytes.Load(), f.rows)
			spare <- f.buf
		}
		if !complete {
			// Closing without the end-of-epoch frame makes the consumer
			// fail rather than see a short epoch.
			return nil
		}
		_, err := w.Write(end)
		return err
	})
	encErr := func() error {
		defer close(frames)
		for {
			var buf []float32
			select {
			case buf = <-spare:
			case <-gctx.Done():
				return nil // the writer failed; its error is the one to report
			}
			rec, err := r.Next(gctx)
			if errors.Is(err, io.EOF) {
				complete = true
				return nil
			}
			if err != nil {
				if gctx.Err() != nil && ctx.Err() == nil {
					return nil
				}
				return fmt.Errorf("read batch: %w", err)
			}
			rows := rec.NumRows()
			buf, data, err := s.tensor.encode(rec, buf)
			rec.Release()
			if err != nil {
				return err
			}
			if rows == 0 {
				spare <- buf // a zero row count would end the epoch
				continue
			}
			select {
			case frames <- tensorFrame{buf: buf, data: data, rows: rows}:
			case <-gctx.Done():
				return nil
			}
		}
	}()
	if err := g.Wait(); err != nil {
		return err
	}
	return encErr
}

// withEpoch returns schema with the spindle.epoch metadata set.
func withEpoch(schema *arrow.Schema, epoch int) *arrow.Schema {
	md := schema.Metadata()
	keys := append([]string(nil), md.Keys()...)
	vals := append([]string(nil), md.Values()...)
	if i := md.FindKey(MetaEpoch); i >= 0 {
		vals[i] = strconv.Itoa(epoch)
	} else {
		keys = append(keys, MetaEpoch)
		vals = append(vals, strconv.Itoa(epoch))
	}
	m := arrow.NewMetadata(keys, vals)
	return arrow.NewSchemaWithEndian(schema.Fields(), &m, schema.Endianness())
}

// skipReader drops the first skip batches of an epoch: where a resumed
// feed starts inside it.
type skipReader struct {
	feed.Reader
	skip int64
}

func (r *skipReader) Next(ctx context.Context) (arrow.RecordBatch, error) {
	for ; r.skip > 0; r.skip-- {
		rec, err := r.Reader.Next(ctx)
		if err != nil {
			return nil, err // io.EOF: the epoch ends before the start
		}
		rec.Release()
	}
	return r.Reader.Next(ctx)
}

// AskAfterTaken passes the wait on to a held epoch (heldEnd).
func (r *skipReader) AskAfterTaken(taken func(ctx context.Context) error) {
	if h, ok := r.Reader.(heldEnd); ok {
		h.AskAfterTaken(taken)
	}
}

// Buffered passes on the read-ahead of the epoch once the skipped batches
// are gone.
func (r *skipReader) Buffered() int {
	if b, ok := r.Reader.(bufferedReader); ok && r.skip == 0 {
		return b.Buffered()
	}
	return 0
}
