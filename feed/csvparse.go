package feed

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unsafe"
)

// csvParser reads CSV records (RFC 4180: quoted fields with doubled quotes,
// CRLF or LF line ends, quoted fields may span lines) from a file, starting
// at a given offset. Blank lines are skipped and are not records. The
// fields of the current record point into the parser's buffer and are
// valid until the next call to next.
type csvParser struct {
	r     io.ReaderAt
	uri   string
	size  int64 // the file's size; -1 for a stream whose end tells
	delim byte

	buf    []byte
	bufOff int64 // file offset of buf[0]
	pos    int   // start of unparsed data in buf
	n      int   // valid bytes in buf
	eof    bool  // buf[:n] reaches the end of the file

	line int64 // line number at pos, 1-based; 0 when unknown

	// The current record.
	recOff  int64
	recLine int64
	starts  []int
	ends    []int
	escaped []bool // the field holds doubled quotes to undo
	scratch []byte
}

// csvReadSize is how much a parser reads from the file at a time.
const csvReadSize = 1 << 20

// errNeedMore says the buffer ends inside a record.
var errNeedMore = errors.New("need more data")

// newCSVParser returns a parser reading r from off; size is r's size, or
// -1 when it is known only at the end (a decompressed stream).
func newCSVParser(r io.ReaderAt, uri string, size, off, line int64, delim byte) *csvParser {
	n := int64(csvReadSize)
	if size >= 0 {
		n = min(n, max(size-off, 0)+1)
	}
	return &csvParser{r: r, uri: uri, size: size, delim: delim, bufOff: off, line: line, buf: make([]byte, n)}
}

// where names the current record's place for error messages.
func (p *csvParser) where() string {
	if p.recLine > 0 {
		return fmt.Sprintf("%s line %d", p.uri, p.recLine)
	}
	return fmt.Sprintf("%s byte %d", p.uri, p.recOff)
}

// offset returns the file offset of the next unparsed byte.
func (p *csvParser) offset() int64 { return p.bufOff + int64(p.pos) }

// fill reads more of the file into the buffer, keeping buf[pos:n].
func (p *csvParser) fill() error {
	if p.pos > 0 {
		copy(p.buf, p.buf[p.pos:p.n])
		p.bufOff += int64(p.pos)
		p.n -= p.pos
		p.pos = 0
	}
	if p.n == len(p.buf) {
		nb := make([]byte, 2*len(p.buf)+1)
		copy(nb, p.buf[:p.n])
		p.buf = nb
	}
	if p.size < 0 {
		// A decompressed stream: its size is known only at its end.
		m, err := p.r.ReadAt(p.buf[p.n:], p.bufOff+int64(p.n))
		p.n += m
		switch {
		case errors.Is(err, io.EOF):
			p.eof = true
		case err != nil:
			return fmt.Errorf("read %s at byte %d of its decompressed text: %w", p.uri, p.bufOff+int64(p.n), err)
		}
		return nil
	}
	want := int(min(int64(len(p.buf)-p.n), p.size-(p.bufOff+int64(p.n))))
	if want > 0 {
		m, err := p.r.ReadAt(p.buf[p.n:p.n+want], p.bufOff+int64(p.n))
		p.n += m
		if err != nil && !(errors.Is(err, io.EOF) && m == want) {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("read %s at byte %d: the file is shorter than its size (%d bytes)", p.uri, p.bufOff+int64(p.n), p.size)
			}
			return fmt.Errorf("read %s at byte %d: %w", p.uri, p.bufOff+int64(p.n), err)
		}
	}
	p.eof = p.bufOff+int64(p.n) >= p.size
	return nil
}

// next parses the next record. It returns io.EOF at the end of the file.
func (p *csvParser) next() error {
	for {
		err := p.parse()
		if err == nil || err == io.EOF {
			return err
		}
		if err != errNeedMore {
			return err
		}
		if p.eof {
			// parse treats the end of the file as the end of a record,
			// so it only asks for more when there is more.
			return fmt.Errorf("%s: internal error: parser wants data past the end", p.where())
		}
		if err := p.fill(); err != nil {
			return err
		}
	}
}

// skipPartialLine moves past the rest of the line the parser starts in,
// for a range that does not start at a line start. It returns io.EOF when
// the file ends first.
func (p *csvParser) skipPartialLine() error {
	for {
		k := bytes.IndexByte(p.buf[p.pos:p.n], '\n')
		if k >= 0 {
			p.pos += k + 1
			return nil
		}
		p.pos = p.n
		if p.eof {
			return io.EOF
		}
		if err := p.fill(); err != nil {
			return err
		}
	}
}

// parse parses one record from buf[pos:n], skipping blank lines. It
// returns errNeedMore, leaving pos where it was, when the buffer ends
// inside the record and the file goes on.
func (p *csvParser) parse() error {
	if err := p.skipBlankLines(); err != nil {
		return err
	}
	data := p.buf[:p.n]
	i := p.pos
	lines := int64(0)
	p.recOff = p.bufOff + int64(i)
	p.recLine = p.line
	p.starts, p.ends, p.escaped = p.starts[:0], p.ends[:0], p.escaped[:0]
	lineEnd := -1 // index of the '\n' ending the current physical line, or len(data)
	for {
		if i < len(data) && data[i] == '"' {
			next, nl, more, err := p.quotedField(data, i)
			if err != nil {
				return err
			}
			i, lines, lineEnd = next, lines+nl, -1
			if more {
				continue
			}
			break
		}
		if lineEnd < i {
			k := bytes.IndexByte(data[i:], '\n')
			if k < 0 {
				if !p.eof {
					return errNeedMore
				}
				lineEnd = len(data)
			} else {
				lineEnd = i + k
			}
		}
		if d := bytes.IndexByte(data[i:lineEnd], p.delim); d >= 0 {
			p.starts, p.ends, p.escaped = append(p.starts, i), append(p.ends, i+d), append(p.escaped, false)
			i += d + 1
			continue
		}
		e := lineEnd
		if e > i && data[e-1] == '\r' {
			e--
		}
		p.starts, p.ends, p.escaped = append(p.starts, i), append(p.ends, e), append(p.escaped, false)
		i = lineEnd
		if i < len(data) {
			i++
			lines++
		}
		break
	}
	p.pos = i
	p.advanceLines(lines)
	return nil
}

// skipBlankLines moves past the blank lines before the next record, which
// are not records. It returns io.EOF at the end of the file, errNeedMore
// when the buffer ends first.
func (p *csvParser) skipBlankLines() error {
	data := p.buf[:p.n]
	i := p.pos
	lines := int64(0)
	defer func() {
		p.pos = i
		p.advanceLines(lines)
	}()
	for i < len(data) {
		switch {
		case data[i] == '\n':
			i++
			lines++
		case data[i] == '\r' && i+1 == len(data) && !p.eof:
			return errNeedMore
		case data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n':
			i += 2
			lines++
		default:
			return nil
		}
	}
	if p.eof {
		return io.EOF
	}
	return errNeedMore
}

// quotedField parses the quoted field starting at data[i] and what ends
// it. It returns the index after it, the line ends it took, and whether
// another field of the record follows.
func (p *csvParser) quotedField(data []byte, i int) (next int, lines int64, more bool, err error) {
	j, esc := i+1, false
	var k int
	for {
		q := bytes.IndexByte(data[j:], '"')
		if q < 0 {
			if p.eof {
				return 0, 0, false, fmt.Errorf("%s: quoted field never ends", p.where())
			}
			return 0, 0, false, errNeedMore
		}
		k = j + q
		if k+1 < len(data) && data[k+1] == '"' {
			esc, j = true, k+2
			continue
		}
		if k+1 == len(data) && !p.eof {
			return 0, 0, false, errNeedMore
		}
		break
	}
	lines = int64(bytes.Count(data[i+1:k], []byte{'\n'}))
	p.starts, p.ends, p.escaped = append(p.starts, i+1), append(p.ends, k), append(p.escaped, esc)
	i = k + 1
	switch {
	case i == len(data): // end of file
	case data[i] == p.delim:
		return i + 1, lines, true, nil
	case data[i] == '\n':
		i++
		lines++
	case data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n':
		i += 2
		lines++
	case data[i] == '\r' && i+1 == len(data):
		if !p.eof {
			return 0, 0, false, errNeedMore
		}
		i++
	default:
		return 0, 0, false, fmt.Errorf("%s: unexpected %q after the closing quote of field %d", p.where(), data[i], len(p.starts))
	}
	return i, lines, false, nil
}

func (p *csvParser) advanceLines(n int64) {
	if p.line > 0 {
		p.line += n
	}
}

// numFields is the current record's field count.
func (p *csvParser) numFields() int { return len(p.starts) }

// field returns field i of the current record, quotes undone. The slice
// is valid until the next call to field or next.
func (p *csvParser) field(i int) []byte {
	b := p.buf[p.starts[i]:p.ends[i]]
	if !p.escaped[i] {
		return b
	}
	p.scratch = p.scratch[:0]
	for len(b) > 0 {
		q := bytes.IndexByte(b, '"')
		if q < 0 {
			p.scratch = append(p.scratch, b...)
			break
		}
		p.scratch = append(p.scratch, b[:q+1]...)
		b = b[q+1:]
		if len(b) > 0 && b[0] == '"' {
			b = b[1:]
		}
	}
	return p.scratch
}

// csvKind is what a CSV column's values look like; kinds only widen.
type csvKind uint8

const (
	kindNone   csvKind = iota // no value seen (every field empty)
	kindInt                   // every value an int64
	kindFloat                 // every value a float64
	kindString                // anything else
)

// observe widens k to cover the value b.
func (k csvKind) observe(b []byte) csvKind {
	if len(b) == 0 || k == kindString {
		return k
	}
	if k <= kindInt {
		if _, ok := parseInt64(b); ok {
			return kindInt
		}
	}
	if _, err := strconv.ParseFloat(bytesString(b), 64); err == nil {
		return kindFloat
	}
	return kindString
}

// widen returns the kind covering both k and o.
func (k csvKind) widen(o csvKind) csvKind { return max(k, o) }

// parseInt64 parses an optionally signed decimal integer.
func parseInt64(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var u uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return int64(-u), true
	}
	if u > 1<<63-1 {
		return 0, false
	}
	return int64(u), true
}

// bytesString views b as a string without copying, for parsers that do
// not keep their argument.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
