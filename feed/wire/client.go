package wire

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/timeline"
)

// readBufferBytes is the client's read buffer. It gathers the small reads
// of headers and metadata; batch bodies larger than it skip it and are
// read straight into their destination, saving a copy.
const readBufferBytes = 64 << 10

// maxTensorBatchBytes bounds the batch a tensor client accepts, so that a
// corrupt row count fails cleanly instead of exhausting memory.
const maxTensorBatchBytes = 4 << 30

// conn wraps a client connection with context-aware reads: a context that
// ends while a read blocks sets a past deadline, which fails the read.
type conn struct {
	c    net.Conn
	path string
	err  error // sticky: set once a read failed or the stream was cut
}

func dial(ctx context.Context, path string) (*conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("connect to feed %s: %w", path, err)
	}
	if uc, ok := c.(*net.UnixConn); ok {
		_ = uc.SetReadBuffer(socketBufferBytes)
	}
	return &conn{c: c, path: path}, nil
}

// watch makes blocking reads on c fail once ctx ends. Call the returned
// function when the read is over.
func (c *conn) watch(ctx context.Context) (stop func() bool) {
	if ctx.Done() == nil {
		return func() bool { return true }
	}
	return context.AfterFunc(ctx, func() { _ = c.c.SetReadDeadline(time.Unix(1, 0)) })
}

// fail records and returns err, preferring the context's error when the
// context caused it.
func (c *conn) fail(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	c.err = fmt.Errorf("%s from feed %s: %w", what, c.path, err)
	return c.err
}

// eosTracker remembers the last eight bytes read, to tell an Arrow stream
// that ended with its end-of-stream marker from one that was cut.
type eosTracker struct {
	r    io.Reader
	last [8]byte
}

var arrowEOS = [8]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}

func (t *eosTracker) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n >= 8 {
		copy(t.last[:], p[n-8:n])
	} else if n > 0 {
		copy(t.last[:], t.last[n:])
		copy(t.last[8-n:], p[:n])
	}
	return n, err
}

// ArrowEpoch reads one epoch of an arrow-mode feed. It is a feed.Reader.
// It is not safe for concurrent use.
type ArrowEpoch struct {
	c     *conn
	eos   *eosTracker  // stream over the socket
	shm   *shmMessages // stream through shared memory
	rd    *ipc.Reader
	epoch int
	done  bool
	taken Taken
}

// Taken counts what the consumer has taken of an epoch: the batches and
// rows Next returned, and whether it returned io.EOF (the epoch was read
// to its end). Checkpoints record it as the feed's position.
type Taken struct {
	Batches, Rows int64
	End           bool
}

var _ feed.Reader = (*ArrowEpoch)(nil)

// DialArrow connects to the arrow-mode feed at socketPath and reads the
// stream's schema. Each call receives the next epoch; Epoch returns -1
// when the feed has no epochs left.
//
// Where the executor offers it (ServerConfig.SharedMemory), the epoch
// comes through shared memory: the batches' buffers are then read-only
// views of memory the executor reuses once they are released, so release
// every batch (and keep no slice of its buffers past that).
func DialArrow(ctx context.Context, socketPath string) (*ArrowEpoch, error) {
	switch c, msgs, err := dialShm(ctx, socketPath); {
	case err == nil:
		return newShmArrowEpoch(ctx, c, msgs)
	case !errors.Is(err, errNoShm):
		return nil, err
	}
	c, err := dial(ctx, socketPath)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(c.c, readBufferBytes)
	eos := &eosTracker{r: br}
	stop := c.watch(ctx)
	rd, err := newArrowReader(br, eos)
	stop()
	if err != nil {
		_ = c.c.Close()
		if ctx.Err() != nil {
			return nil, c.fail(ctx, "read schema", err)
		}
		return nil, fmt.Errorf("read schema from feed %s: %w", socketPath, err)
	}
	epochStr, ok := rd.Schema().Metadata().GetValue(MetaEpoch)
	epoch, perr := strconv.Atoi(epochStr)
	if !ok || perr != nil {
		rd.Release()
		_ = c.c.Close()
		return nil, fmt.Errorf("%w: feed %s: schema metadata %s is %q, want an epoch number", ErrBadStream, socketPath, MetaEpoch, epochStr)
	}
	return &ArrowEpoch{c: c, eos: eos, rd: rd, epoch: epoch}, nil
}

// newShmArrowEpoch reads the schema of a shared-memory stream.
func newShmArrowEpoch(ctx context.Context, c *conn, msgs *shmMessages) (*ArrowEpoch, error) {
	fail := func(err error) (*ArrowEpoch, error) {
		msgs.close()
		_ = c.c.Close()
		return nil, err
	}
	stop := c.watch(ctx)
	rd, err := ipc.NewReaderFromMessageReader(msgs, ipc.WithAllocator(&recycler{}))
	stop()
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%w: %w", ErrTruncated, err)
		}
		return fail(c.fail(ctx, "read schema", err))
	}
	epochStr, ok := rd.Schema().Metadata().GetValue(MetaEpoch)
	epoch, perr := strconv.Atoi(epochStr)
	if !ok || perr != nil {
		rd.Release()
		return fail(fmt.Errorf("%w: feed %s: schema metadata %s is %q, want an epoch number", ErrBadStream, c.path, MetaEpoch, epochStr))
	}
	return &ArrowEpoch{c: c, shm: msgs, rd: rd, epoch: epoch}, nil
}

// newArrowReader starts reading an Arrow IPC stream, first making sure
// that the stream is one: a tensor-format stream read as Arrow would look
// like a message of a billion bytes.
func newArrowReader(br *bufio.Reader, r io.Reader) (*ipc.Reader, error) {
	head, err := br.Peek(4)
	switch {
	case errors.Is(err, io.EOF) && len(head) == 0:
		return nil, fmt.Errorf("%w: the stream is empty", ErrTruncated)
	case err != nil && !errors.Is(err, io.EOF):
		return nil, err
	case string(head) == tensorMagic:
		return nil, fmt.Errorf("%w: the feed speaks the tensor format, not Arrow IPC (read it with DialTensor)", ErrBadStream)
	case len(head) == 4 && binary.LittleEndian.Uint32(head) != 0xffffffff:
		return nil, fmt.Errorf("%w: the stream does not start with an Arrow IPC message", ErrBadStream)
	}
	rd, err := ipc.NewReader(r, ipc.WithAllocator(&recycler{}))
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = fmt.Errorf("%w: %w", ErrTruncated, err)
	}
	return rd, err
}

// Schema returns the schema of the epoch's batches, including the
// spindle.epoch metadata.
func (a *ArrowEpoch) Schema() *arrow.Schema { return a.rd.Schema() }

// Epoch returns the epoch number, or -1 when the feed has no epochs left
// (the stream then has no batches).
func (a *ArrowEpoch) Epoch() int { return a.epoch }

// Next returns the next record batch, which the caller must Release, or
// io.EOF after the last one. A stream the executor cut before its end
// fails with ErrTruncated. Once ctx ends, Next fails and the epoch is
// unusable.
func (a *ArrowEpoch) Next(ctx context.Context) (arrow.RecordBatch, error) {
	if a.c.err != nil {
		return nil, a.c.err
	}
	if a.done {
		return nil, io.EOF
	}
	defer timeline.Start(timeline.CatFeed, "next batch")()
	stop := a.c.watch(ctx)
	ok := a.rd.Next()
	stop()
	if !ok {
		if err := a.rd.Err(); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				err = fmt.Errorf("%w: %w", ErrTruncated, err)
			}
			return nil, a.c.fail(ctx, "read batch", err)
		}
		if a.eos != nil && a.eos.last != arrowEOS {
			return nil, a.c.fail(ctx, "read batch", fmt.Errorf("%w: no end-of-stream marker", ErrTruncated))
		}
		a.done = true
		a.taken.End = true
		return nil, io.EOF
	}
	rec := a.rd.RecordBatch()
	rec.Retain()
	a.taken.Batches++
	a.taken.Rows += rec.NumRows()
	return rec, nil
}

// Taken returns what Next has returned so far.
func (a *ArrowEpoch) Taken() Taken { return a.taken }

// Close closes the connection. Closing before the end of the epoch
// abandons the rest of it; the next connection gets the next epoch.
func (a *ArrowEpoch) Close() error {
	a.rd.Release()
	if a.shm != nil {
		a.shm.close() // closes the connection once nothing is held
		return nil
	}
	return a.c.c.Close()
}

// TensorBatch is one batch of a tensor-mode feed.
type TensorBatch struct {
	// Rows is the number of rows.
	Rows int
	// Features holds Rows×F values, row-major: row 0's F features, then row 1's.
	Features []float32
	// Labels holds Rows values, or is nil when the feed has no label column.
	Labels []float32
}

// TensorEpoch reads one epoch of a tensor-mode feed. It is not safe for
// concurrent use.
type TensorEpoch struct {
	c        *conn
	br       *bufio.Reader // over the socket
	shm      *shmMessages  // or through shared memory
	prev     uint64        // with shm: the message of the batch returned last, or noMessage
	epoch    int
	features []string
	label    string
	hasLabel bool
	buf      []float32
	done     bool
	taken    Taken
}

// DialTensor connects to the tensor-mode feed at socketPath and reads the
// stream header. Each call receives the next epoch; Epoch returns -1 when
// the feed has no epochs left.
func DialTensor(ctx context.Context, socketPath string) (*TensorEpoch, error) {
	switch c, msgs, err := dialShm(ctx, socketPath); {
	case err == nil:
		return newShmTensorEpoch(ctx, c, msgs)
	case !errors.Is(err, errNoShm):
		return nil, err
	}
	c, err := dial(ctx, socketPath)
	if err != nil {
		return nil, err
	}
	t := &TensorEpoch{c: c, br: bufio.NewReaderSize(c.c, readBufferBytes)}
	stop := c.watch(ctx)
	err = t.readHeader()
	stop()
	if err != nil {
		_ = c.c.Close()
		if ctx.Err() != nil {
			return nil, c.fail(ctx, "read header", err)
		}
		return nil, fmt.Errorf("read header from feed %s: %w", socketPath, err)
	}
	return t, nil
}

func (t *TensorEpoch) readHeader() error {
	var h [tensorHeaderFixed]byte
	readFull := func(p []byte) error {
		_, err := io.ReadFull(t.br, p)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: stream ended inside its header", ErrTruncated)
		}
		return err
	}
	// The magic first, so that a stream of another kind is named as such
	// even when it is shorter than a header.
	if err := readFull(h[:4]); err != nil {
		return err
	}
	if string(h[:4]) != tensorMagic {
		if binary.LittleEndian.Uint32(h[:4]) == 0xffffffff {
			return fmt.Errorf("%w: the feed speaks Arrow IPC, not the tensor format (read it with DialArrow)", ErrBadStream)
		}
		return fmt.Errorf("%w: bad magic %q, want %q", ErrBadStream, h[:4], tensorMagic)
	}
	if err := readFull(h[4:]); err != nil {
		return err
	}
	if v := binary.LittleEndian.Uint16(h[4:]); v != tensorVersion {
		return fmt.Errorf("%w: tensor format version %d, this client reads version %d", ErrBadStream, v, tensorVersion)
	}
	flags := binary.LittleEndian.Uint16(h[6:])
	t.hasLabel = flags&flagLabel != 0
	t.epoch = int(int32(binary.LittleEndian.Uint32(h[8:])))
	nf := binary.LittleEndian.Uint32(h[12:])
	nn := binary.LittleEndian.Uint32(h[16:])
	if nn > maxNamesBytes {
		return fmt.Errorf("%w: column names take %d bytes", ErrBadStream, nn)
	}
	js := make([]byte, nn)
	if err := readFull(js); err != nil {
		return err
	}
	var names []string
	if err := json.Unmarshal(js, &names); err != nil {
		return fmt.Errorf("%w: column names: %w", ErrBadStream, err)
	}
	want := int(nf)
	if t.hasLabel {
		want++
	}
	if len(names) != want {
		return fmt.Errorf("%w: header has %d names for %d features (label: %t)", ErrBadStream, len(names), nf, t.hasLabel)
	}
	if t.hasLabel {
		t.label = names[nf]
	}
	t.features = names[:nf]
	return nil
}

// Epoch returns the epoch number, or -1 when the feed has no epochs left
// (the stream then has no batches).
func (t *TensorEpoch) Epoch() int { return t.epoch }

// FeatureNames returns the names of the feature columns, in the order of
// each row's values.
func (t *TensorEpoch) FeatureNames() []string { return t.features }

// NumFeatures returns F, the number of values in a row.
func (t *TensorEpoch) NumFeatures() int { return len(t.features) }

// LabelName returns the label column's name and whether batches carry labels.
func (t *TensorEpoch) LabelName() (string, bool) { return t.label, t.hasLabel }

// Next returns the next batch, or io.EOF after the last one. The batch's
// slices are reused by the following call to Next, and are not to be
// used once the epoch is closed: copy what you keep. A
// stream the executor cut before its end fails with ErrTruncated. Once ctx
// ends, Next fails and the epoch is unusable.
func (t *TensorEpoch) Next(ctx context.Context) (TensorBatch, error) {
	if t.c.err != nil {
		return TensorBatch{}, t.c.err
	}
	if t.done {
		return TensorBatch{}, io.EOF
	}
	defer timeline.Start(timeline.CatFeed, "next batch")()
	if t.shm != nil {
		return t.nextShm(ctx)
	}
	stop := t.c.watch(ctx)
	defer stop()
	var rb [4]byte
	if _, err := io.ReadFull(t.br, rb[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%w: no end-of-epoch frame", ErrTruncated)
		}
		return TensorBatch{}, t.c.fail(ctx, "read batch", err)
	}
	rows := int(binary.LittleEndian.Uint32(rb[:]))
	if rows == 0 {
		t.done = true
		t.taken.End = true
		return TensorBatch{}, io.EOF
	}
	perRow := t.valuesPerRow()
	if perRow > 0 && uint64(rows) > maxTensorBatchBytes/4/uint64(perRow) {
		return TensorBatch{}, t.c.fail(ctx, "read batch", fmt.Errorf("%w: batch of %d rows × %d features is too large", ErrBadStream, rows, len(t.features)))
	}
	n := rows * perRow
	if cap(t.buf) < n {
		t.buf = make([]float32, n)
	}
	buf := t.buf[:n]
	raw := f32bytes(buf)
	if _, err := io.ReadFull(t.br, raw); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%w: stream ended inside a batch of %d rows", ErrTruncated, rows)
		}
		return TensorBatch{}, t.c.fail(ctx, "read batch", err)
	}
	return t.batch(rows, buf), nil
}

// valuesPerRow is the values of a row in a batch frame: its features and
// its label, if any.
func (t *TensorEpoch) valuesPerRow() int {
	if t.hasLabel {
		return len(t.features) + 1
	}
	return len(t.features)
}

// batch makes the batch of rows rows whose values (features, then labels)
// are vals, as read off the stream (little-endian), and counts it taken.
func (t *TensorEpoch) batch(rows int, vals []float32) TensorBatch {
	if !littleEndian {
		raw := f32bytes(vals)
		for i := 0; i < len(raw); i += 4 {
			binary.NativeEndian.PutUint32(raw[i:], binary.LittleEndian.Uint32(raw[i:]))
		}
	}
	nf := len(t.features)
	b := TensorBatch{Rows: rows, Features: vals[:rows*nf]}
	if t.hasLabel {
		b.Labels = vals[rows*nf:]
	}
	t.taken.Batches++
	t.taken.Rows += int64(rows)
	return b
}

// Taken returns what Next has returned so far.
func (t *TensorEpoch) Taken() Taken { return t.taken }

// Close closes the connection. Closing before the end of the epoch
// abandons the rest of it; the next connection gets the next epoch.
func (t *TensorEpoch) Close() error {
	if t.shm != nil {
		t.freePrev()
		t.shm.close() // closes the connection
		return nil
	}
	return t.c.c.Close()
}
