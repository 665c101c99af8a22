package feed

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/spindle-ml/spindle/fsys"
)

// Planning needs each record batch's row count and byte range. The Arrow
// IPC file footer holds the byte ranges (a block table) and each batch's
// message metadata holds its row count, so planning reads the footer and
// then only the small metadata of each batch, never a batch body. arrow-go
// does not expose either, so this file walks the two flatbuffer tables
// (Footer and Message, from the Arrow format's File.fbs and Message.fbs)
// with bounds-checked reads.

// ipcMagic starts and ends an Arrow IPC file.
var ipcMagic = []byte("ARROW1")

// errBadIPC says the footer or a message is malformed.
var errBadIPC = errors.New("malformed Arrow IPC metadata")

// fbTable is a flatbuffer table inside buf.
type fbTable struct {
	buf []byte
	pos int
	vt  int // vtable position
	vtn int // vtable size in bytes
}

func fbRoot(buf []byte) (fbTable, error) {
	if len(buf) < 4 {
		return fbTable{}, errBadIPC
	}
	return fbAt(buf, int(binary.LittleEndian.Uint32(buf)))
}

func fbAt(buf []byte, pos int) (fbTable, error) {
	if pos < 0 || pos+4 > len(buf) {
		return fbTable{}, errBadIPC
	}
	vt := pos - int(int32(binary.LittleEndian.Uint32(buf[pos:])))
	if vt < 0 || vt+4 > len(buf) {
		return fbTable{}, errBadIPC
	}
	vtn := int(binary.LittleEndian.Uint16(buf[vt:]))
	if vtn < 4 || vt+vtn > len(buf) {
		return fbTable{}, errBadIPC
	}
	return fbTable{buf: buf, pos: pos, vt: vt, vtn: vtn}, nil
}

// field returns the position of field i, or -1 when it is absent. size is
// the bytes the caller will read there.
func (t fbTable) field(i, size int) (int, error) {
	slot := 4 + 2*i
	if slot+2 > t.vtn {
		return -1, nil
	}
	off := int(binary.LittleEndian.Uint16(t.buf[t.vt+slot:]))
	if off == 0 {
		return -1, nil
	}
	p := t.pos + off
	if p+size > len(t.buf) {
		return -1, errBadIPC
	}
	return p, nil
}

func (t fbTable) int64Field(i int) (int64, error) {
	p, err := t.field(i, 8)
	if p < 0 {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint64(t.buf[p:])), nil
}

func (t fbTable) uint8Field(i int) (uint8, error) {
	p, err := t.field(i, 1)
	if p < 0 {
		return 0, err
	}
	return t.buf[p], nil
}

func (t fbTable) tableField(i int) (fbTable, bool, error) {
	p, err := t.field(i, 4)
	if p < 0 {
		return fbTable{}, false, err
	}
	sub, err := fbAt(t.buf, p+int(binary.LittleEndian.Uint32(t.buf[p:])))
	return sub, err == nil, err
}

// vectorField returns the start and length of a vector field of elemSize
// byte elements.
func (t fbTable) vectorField(i, elemSize int) (start, n int, err error) {
	p, err := t.field(i, 4)
	if p < 0 {
		return 0, 0, err
	}
	v := p + int(binary.LittleEndian.Uint32(t.buf[p:]))
	if v < 0 || v+4 > len(t.buf) {
		return 0, 0, errBadIPC
	}
	n = int(binary.LittleEndian.Uint32(t.buf[v:]))
	if n < 0 || v+4+n*elemSize > len(t.buf) {
		return 0, 0, errBadIPC
	}
	return v + 4, n, nil
}

// ipcBlock is one record batch of an Arrow IPC file.
type ipcBlock struct {
	off, metaLen, bodyLen int64
}

// ipcBlocks reads the record batch table from an Arrow IPC file's footer.
func ipcBlocks(f fsys.File) ([]ipcBlock, error) {
	size := f.Size()
	tail := make([]byte, 10)
	// Leading magic and padding, trailing footer length and magic.
	if size < 8+10 {
		return nil, fmt.Errorf("file too small (%d bytes) for an Arrow IPC file", size)
	}
	if _, err := f.ReadAt(tail, size-10); err != nil {
		return nil, err
	}
	if !bytes.Equal(tail[4:], ipcMagic) {
		return nil, errors.New("no Arrow IPC file magic at the end (truncated, or not an Arrow IPC file)")
	}
	flen := int64(int32(binary.LittleEndian.Uint32(tail)))
	if flen <= 0 || flen > size-10-8 {
		return nil, fmt.Errorf("footer length %d does not fit the file: %w", flen, errBadIPC)
	}
	footer := make([]byte, flen)
	if _, err := f.ReadAt(footer, size-10-flen); err != nil {
		return nil, err
	}
	root, err := fbRoot(footer)
	if err != nil {
		return nil, err
	}
	if err := checkIPCSchema(root); err != nil {
		return nil, err
	}
	// Footer: 0 version, 1 schema, 2 dictionaries, 3 recordBatches; a Block
	// struct is {offset int64, metaDataLength int32, pad, bodyLength int64}.
	start, n, err := root.vectorField(3, 24)
	if err != nil {
		return nil, err
	}
	blocks := make([]ipcBlock, n)
	for i := range blocks {
		b := footer[start+24*i:]
		blocks[i] = ipcBlock{
			off:     int64(binary.LittleEndian.Uint64(b)),
			metaLen: int64(int32(binary.LittleEndian.Uint32(b[8:]))),
			bodyLen: int64(binary.LittleEndian.Uint64(b[16:])),
		}
		if blocks[i].off < 0 || blocks[i].metaLen < 8 || blocks[i].bodyLen < 0 ||
			blocks[i].off+blocks[i].metaLen+blocks[i].bodyLen > size {
			return nil, fmt.Errorf("record batch %d lies outside the file: %w", i, errBadIPC)
		}
	}
	return blocks, nil
}

// ipcBatchRows reads the row count from a record batch's message metadata.
func ipcBatchRows(f fsys.File, b ipcBlock) (int64, error) {
	meta := make([]byte, b.metaLen)
	if _, err := f.ReadAt(meta, b.off); err != nil {
		return 0, err
	}
	// An encapsulated message: 0xFFFFFFFF, int32 length, flatbuffer; or,
	// before Arrow 0.15, just int32 length, flatbuffer.
	body := meta[4:]
	if binary.LittleEndian.Uint32(meta) == 0xFFFFFFFF {
		body = meta[8:]
	}
	msg, err := fbRoot(body)
	if err != nil {
		return 0, err
	}
	// Message: 0 version, 1 header_type, 2 header, 3 bodyLength.
	typ, err := msg.uint8Field(1)
	if err != nil {
		return 0, err
	}
	if typ != headerRecordBatch {
		return 0, fmt.Errorf("block at byte %d holds message type %d, not a record batch: %w", b.off, typ, errBadIPC)
	}
	hdr, ok, err := msg.tableField(2)
	if err != nil || !ok {
		return 0, fmt.Errorf("record batch at byte %d has no header: %w", b.off, errBadIPC)
	}
	// RecordBatch: 0 length.
	rows, err := hdr.int64Field(0)
	if err != nil {
		return 0, err
	}
	if rows < 0 {
		return 0, fmt.Errorf("record batch at byte %d claims %d rows: %w", b.off, rows, errBadIPC)
	}
	return rows, nil
}

// inspectIPC returns an Arrow IPC file's schema and its record batches.
func inspectIPC(f fsys.File, uri string) (_ *arrow.Schema, _ []unit, err error) {
	defer recoverDecode(uri, "Arrow IPC file", &err)
	// The footer is checked before arrow-go decodes it (ipcguard.go).
	blocks, err := ipcBlocks(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: read the Arrow IPC footer: %w", ErrInput, uri, err)
	}
	r, err := ipc.NewFileReader(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s is not an Arrow IPC file or is damaged: %w", ErrInput, uri, err)
	}
	schema := cleanSchema(r.Schema())
	r.Close()
	units := make([]unit, len(blocks))
	for i, b := range blocks {
		rows, err := ipcBatchRows(f, b)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s: read record batch %d: %w", ErrInput, uri, i, err)
		}
		units[i] = unit{index: i, rows: rows, off: b.off, length: b.metaLen + b.bodyLen}
	}
	return schema, units, nil
}

// ipcSource reads the record batches of one Arrow IPC file split.
type ipcSource struct {
	uri     string
	file    fsys.File
	r       *ipc.FileReader
	batches []int
	cut     batchCutter
}

// openIPC opens an Arrow IPC file split: its record batches, starting
// RowOffset rows into the first.
func openIPC(f fsys.File, s Split, opts ReadOptions) (_ *opened, err error) {
	defer recoverDecode(s.URI, "Arrow IPC file", &err)
	if _, err := ipcBlocks(f); err != nil {
		return nil, fmt.Errorf("%w: %s: read the Arrow IPC footer: %w", ErrInput, s.URI, err)
	}
	r, err := ipc.NewFileReader(f, ipc.WithAllocator(opts.Allocator))
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not an Arrow IPC file or is damaged: %w", ErrInput, s.URI, err)
	}
	fail := func(err error) (*opened, error) {
		r.Close()
		return nil, err
	}
	fileSchema := r.Schema()
	sel, err := SelectColumns(FieldNames(fileSchema), opts.Columns, opts.LabelColumn, s.URI)
	if err != nil {
		return fail(err)
	}
	out := ProjectSchema(fileSchema, sel)
	if opts.Schema != nil {
		if err := checkPlanned(opts.Schema, out, s.URI); err != nil {
			return fail(err)
		}
		out = opts.Schema
	}
	proj := make([]int, len(sel))
	for i, name := range sel {
		proj[i] = fileSchema.FieldIndices(name)[0]
	}
	batches := s.Batches
	if len(batches) == 0 {
		batches = make([]int, r.NumRecords())
		for i := range batches {
			batches[i] = i
		}
	}
	for _, b := range batches {
		if b < 0 || b >= r.NumRecords() {
			return fail(fmt.Errorf("%w: %s has %d record batches, the split names batch %d", ErrInput, s.URI, r.NumRecords(), b))
		}
	}
	src := &ipcSource{uri: s.URI, file: f, r: r, batches: batches, cut: batchCutter{skip: s.RowOffset, batchRows: int64(opts.BatchRows)}}
	return &opened{src: src, schema: out, proj: proj}, nil
}

func (s *ipcSource) next(ctx context.Context) (arrow.RecordBatch, error) {
	return s.cut.next(ctx, func() (arrow.RecordBatch, error) {
		if len(s.batches) == 0 {
			return nil, io.EOF
		}
		i := s.batches[0]
		s.batches = s.batches[1:]
		rec, err := s.r.RecordBatchAt(i)
		if err != nil {
			return nil, fmt.Errorf("read record batch %d of %s: %w", i, s.uri, err)
		}
		return rec, nil
	})
}

func (s *ipcSource) close() error {
	s.cut.release()
	s.r.Close()
	return s.file.Close()
}
