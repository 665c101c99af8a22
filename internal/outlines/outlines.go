package outlines

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxLine is the longest line Read hands on whole; the rest of a
// longer line is dropped and counted.
const DefaultMaxLine = 64 * 1024

// readChunk is how much Read asks of the underlying reader at a time.
const readChunk = 64 * 1024

// Read reads r to its end and calls emit once per line, without the line
// end. A line ends at "\n", at "\r\n" and at a lone "\r" (the way
// terminals redraw a progress bar), so every redraw is a line of its own.
// A line longer than maxLine bytes (DefaultMaxLine when maxLine <= 0) is
// cut to maxLine bytes and a note saying how many bytes were dropped is
// appended; the rest of it is still read, so the writer never blocks on a
// reader that gave up. The slice passed to emit is valid only during the
// call. Read returns nil at the end of r and r's error otherwise.
func Read(r io.Reader, maxLine int, emit func(line []byte)) error {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	buf := make([]byte, readChunk)
	line := make([]byte, 0, min(maxLine, readChunk))
	var dropped int64
	afterCR := false // the last byte ended a line with "\r": a "\n" next belongs to it
	flush := func() {
		if dropped > 0 {
			line = fmt.Appendf(line, " ... [line cut: %d more bytes dropped]", dropped)
		}
		emit(line)
		line, dropped = line[:0], 0
	}
	for {
		n, err := r.Read(buf)
		chunk := buf[:n]
		for len(chunk) > 0 {
			if afterCR {
				afterCR = false
				if chunk[0] == '\n' {
					chunk = chunk[1:]
					continue
				}
			}
			i := bytes.IndexAny(chunk, "\r\n")
			part := chunk
			if i >= 0 {
				part = chunk[:i]
			}
			if room := maxLine - len(line); len(part) > room {
				line = append(line, part[:room]...)
				dropped += int64(len(part) - room)
			} else {
				line = append(line, part...)
			}
			if i < 0 {
				break
			}
			afterCR = chunk[i] == '\r'
			chunk = chunk[i+1:]
			flush()
		}
		if err != nil {
			if len(line) > 0 || dropped > 0 {
				flush()
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}
