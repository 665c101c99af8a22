package worker

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// An executor's stdout and stderr, as the worker keeps them, are rotated:
// the file STREAM in the executor's directory moves to STREAM.1 (the older
// ones to STREAM.2, ...) when it would pass the size bound, and only so
// many old files are kept, so that a training process printing for days
// (a progress bar redrawn with \r, say) cannot fill the worker's disk.
// STREAM.rotated holds how many bytes have moved out of STREAM in all:
// readers count offsets from the stream's start, across rotations, and
// what was dropped is skipped.

// rotatingLog writes one stream of an executor, rotating its file.
type rotatingLog struct {
	dir, name string
	maxBytes  int64 // 0: never rotate
	keep      int   // old files kept

	mu      sync.Mutex
	f       *os.File
	size    int64 // bytes in the current file
	rotated int64 // bytes moved out of it before
}

// openRotatingLog opens (appending) stream name in dir.
func openRotatingLog(dir, name string, maxBytes int64, keep int) (*rotatingLog, error) {
	l := &rotatingLog{dir: dir, name: name, maxBytes: maxBytes, keep: keep}
	l.rotated = readRotated(dir, name)
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *rotatingLog) open() error {
	f, err := os.OpenFile(filepath.Join(l.dir, l.name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open executor %s: %w", l.name, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("open executor %s: %w", l.name, err)
	}
	l.f, l.size = f, fi.Size()
	return nil
}

// Write appends p, rotating whenever the file reaches its bound (a write
// that does not fit is split there).
func (l *rotatingLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	written := 0
	for len(p) > 0 {
		if l.f == nil {
			return written, os.ErrClosed
		}
		chunk := p
		if l.maxBytes > 0 {
			if l.size >= l.maxBytes {
				if err := l.rotate(); err != nil {
					return written, err
				}
			}
			chunk = p[:min(int64(len(p)), l.maxBytes-l.size)]
		}
		n, err := l.f.Write(chunk)
		l.size += int64(n)
		written += n
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// rotate moves the current file to NAME.1 and starts a new one. l.mu is
// held.
func (l *rotatingLog) rotate() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("rotate executor %s: %w", l.name, err)
	}
	l.f = nil
	base := filepath.Join(l.dir, l.name)
	_ = os.Remove(fmt.Sprintf("%s.%d", base, l.keep))
	for i := l.keep - 1; i >= 1; i-- {
		_ = os.Rename(fmt.Sprintf("%s.%d", base, i), fmt.Sprintf("%s.%d", base, i+1))
	}
	var err error
	if l.keep > 0 {
		err = os.Rename(base, base+".1")
	} else {
		err = os.Remove(base)
	}
	if err != nil {
		return fmt.Errorf("rotate executor %s: %w", l.name, err)
	}
	l.rotated += l.size
	if err := writeRotated(l.dir, l.name, l.rotated); err != nil {
		return err
	}
	return l.open()
}

// Close closes the current file.
func (l *rotatingLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// readRotated returns how many bytes have moved out of stream name's
// file, 0 when it never rotated.
func readRotated(dir, name string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, name+".rotated"))
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// writeRotated records n for readRotated, replacing the file whole.
func writeRotated(dir, name string, n int64) error {
	path := filepath.Join(dir, name+".rotated")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(n, 10)+"\n"), 0o600); err != nil {
		return fmt.Errorf("rotate executor %s: %w", name, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rotate executor %s: %w", name, err)
	}
	return nil
}

// logSegment is one file of a stream: its bytes are the stream's
// [start, start+size).
type logSegment struct {
	path        string
	start, size int64
}

// logSegments lists the files of stream name in dir, oldest first. The
// current file must exist (fs.ErrNotExist otherwise).
func logSegments(dir, name string) ([]logSegment, error) {
	base := filepath.Join(dir, name)
	cur, err := os.Stat(base)
	if err != nil {
		return nil, err
	}
	rotated := readRotated(dir, name)
	segs := []logSegment{{path: base, start: rotated, size: cur.Size()}}
	start := rotated
	for i := 1; ; i++ {
		p := fmt.Sprintf("%s.%d", base, i)
		fi, err := os.Stat(p)
		if err != nil || start-fi.Size() < 0 {
			break
		}
		start -= fi.Size()
		segs = append([]logSegment{{path: p, start: start, size: fi.Size()}}, segs...)
	}
	return segs, nil
}

// readLog reads up to limit bytes of stream name from offset off, counted
// from the stream's start across rotations (negative: from its end). An
// offset in bytes rotation dropped reads from the oldest kept. It returns
// the bytes, the offset after them and the stream's size so far.
func readLog(dir, name string, off, limit int64) ([]byte, int64, int64, error) {
	segs, err := logSegments(dir, name)
	if err != nil {
		return nil, 0, 0, err
	}
	last := segs[len(segs)-1]
	total := last.start + last.size
	if off < 0 {
		off = max(total+off, 0)
	}
	off = max(off, segs[0].start)
	for _, s := range segs {
		if off >= s.start+s.size {
			continue
		}
		f, err := os.Open(s.path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // rotated away meanwhile
			}
			return nil, 0, 0, err
		}
		buf := make([]byte, min(limit, s.start+s.size-off))
		n, err := f.ReadAt(buf, off-s.start)
		f.Close()
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, 0, err
		}
		return buf[:n], off + int64(n), total, nil
	}
	return nil, max(off, total), total, nil
}
