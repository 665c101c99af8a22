package fsys

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/colinmarc/hdfs/v2"
)

const (
	// hdfsWriteAttempts bounds the write pipelines one file may lose: a
	// pipeline that fails (a datanode died or stopped answering) is
	// replaced by a new one that the namenode chooses among the datanodes
	// still alive, and the file is written again from the start.
	hdfsWriteAttempts = 3
	// hdfsReplayMemory is how much of a file being written is kept in
	// memory for a new pipeline to write again; the rest waits in a
	// local temporary file, removed when the file is committed or
	// aborted.
	hdfsReplayMemory = 4 << 20
)

// CreateAtomic writes to ".<name>._spindle_tmp_<random>" beside name; Commit
// renames it over name (HDFS's rename with overwrite replaces the old file
// in one namenode operation).
//
// A datanode of the write pipeline that dies does not fail the write:
// colinmarc/hdfs does no pipeline recovery, so the file keeps what it was
// given and, when its pipeline breaks, starts a new temporary file on a
// new pipeline and writes it again, up to hdfsWriteAttempts pipelines.
func (h *hdfsFS) CreateAtomic(ctx context.Context, name string) (AtomicFile, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	_, base := path.Split(name)
	if base == "" {
		return nil, &fs.PathError{Op: "create", Path: h.uri(name), Err: syscall.EISDIR}
	}
	c, err := h.acquire(ctx)
	if err != nil {
		return nil, h.pathError("create", name, err)
	}
	a := &hdfsAtomic{h: h, c: c, final: name}
	if err := a.create(); err != nil {
		h.release(c)
		return nil, h.pathError("create", name, err)
	}
	return a, nil
}

// hdfsAtomic is a file being written under a temporary name, on the
// client it was created on until it is committed or aborted.
type hdfsAtomic struct {
	h     *hdfsFS
	c     *pooledClient
	w     *hdfs.FileWriter
	tmp   string
	final string
	done  bool

	// kept is everything written so far, for a new pipeline.
	kept replayLog
	// lost lists the pipelines' failures, naming their datanodes.
	lost []string
}

// create opens a new temporary file beside the final name.
func (a *hdfsAtomic) create() error {
	var rnd [8]byte
	rand.Read(rnd[:])
	dir, base := path.Split(a.final)
	a.tmp = path.Join(dir, "."+base+"._spindle_tmp_"+hex.EncodeToString(rnd[:]))
	w, err := a.c.c.Create(a.tmp)
	if err != nil {
		return err
	}
	a.w = w
	return nil
}

func (a *hdfsAtomic) Write(p []byte) (int, error) {
	if a.done {
		return 0, &fs.PathError{Op: "write", Path: a.h.uri(a.final), Err: os.ErrClosed}
	}
	if err := a.kept.Write(p); err != nil {
		return 0, &fs.PathError{Op: "write", Path: a.h.uri(a.final), Err: fmt.Errorf("keep a copy for pipeline recovery: %w", err)}
	}
	err := a.write(p)
	for err != nil && a.replaceable(err) {
		err = a.replacePipeline(err)
	}
	if err != nil {
		return 0, a.h.pathError("write", a.final, a.failure(err))
	}
	return len(p), nil
}

// write writes p on the current pipeline.
func (a *hdfsAtomic) write(p []byte) error {
	if err := a.w.SetDeadline(time.Now().Add(a.h.cluster.ioTimeout)); err != nil {
		return err
	}
	_, err := a.w.Write(p)
	return err
}

// replaceable says whether err is a pipeline's failure that a new
// pipeline may get past: a datanode's connection failed or timed out,
// or a datanode reported an error.
func (a *hdfsAtomic) replaceable(err error) bool {
	if len(a.lost) >= hdfsWriteAttempts-1 {
		return false
	}
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.As(err, &oe), errors.As(err, &ne):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNRESET):
		return true
	}
	// colinmarc/hdfs reports a datanode's refusal or a failed ack as text.
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "write failed") || strings.Contains(msg, "ack error")
}

// replacePipeline gives up the broken pipeline (and its temporary file),
// starts a new temporary file and writes everything kept again.
func (a *hdfsAtomic) replacePipeline(cause error) error {
	a.lost = append(a.lost, pipelineFailure(cause))
	slog.Default().Warn("hdfs write pipeline failed; writing again on a new one",
		"component", "hdfs", "file", a.h.uri(a.final), "failure", a.lost[len(a.lost)-1], "attempt", len(a.lost)+1)
	_ = a.w.SetDeadline(time.Now().Add(a.h.cluster.dialTimeout))
	a.w.Close() // broken: this only lets go of its connection
	a.c.c.Remove(a.tmp)
	if err := a.create(); err != nil {
		return err
	}
	return a.kept.replay(a.write)
}

// failure says what failed, with the pipelines lost before.
func (a *hdfsAtomic) failure(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the client's own path, the temporary one
	}
	var he hdfs.Error
	if errors.As(err, &he) && he.Message() != "" {
		// The namenode's own words: no datanode left to write to, say.
		msg, _, _ := strings.Cut(he.Message(), "\n")
		err = fmt.Errorf("%w: %s", err, msg)
	}
	if len(a.lost) == 0 {
		return err
	}
	return fmt.Errorf("%w (after %d failed write pipelines: %s)", err, len(a.lost), strings.Join(a.lost, "; "))
}

// pipelineFailure describes a pipeline's failure, naming the datanode
// when the error does.
func pipelineFailure(err error) string {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Addr != nil {
		return fmt.Sprintf("datanode %s: %v", oe.Addr, err)
	}
	return err.Error()
}

// Commit closes the temporary file (waiting for every datanode to hold
// it) and renames it over the final name.
func (a *hdfsAtomic) Commit() error {
	if a.done {
		return &fs.PathError{Op: "commit", Path: a.h.uri(a.final), Err: os.ErrClosed}
	}
	a.done = true
	defer a.h.release(a.c)
	defer a.kept.Close()
	err := a.w.SetDeadline(time.Now().Add(a.h.cluster.ioTimeout))
	if err == nil {
		err = closeWriter(a.w)
	}
	for err != nil && !hdfs.IsErrReplicating(err) && a.replaceable(err) {
		if err = a.replacePipeline(err); err == nil {
			err = closeWriter(a.w)
		}
	}
	if err != nil {
		a.c.c.Remove(a.tmp)
		return a.h.pathError("write", a.final, a.failure(err))
	}
	if err := a.c.c.Rename(a.tmp, a.final); err != nil {
		a.c.c.Remove(a.tmp)
		return a.h.pathError("publish", a.final, err)
	}
	return nil
}

// closeWriter closes w, retrying while the namenode waits for replicas, as
// the Java client does.
func closeWriter(w *hdfs.FileWriter) error {
	backoff := 50 * time.Millisecond
	for i := 0; ; i++ {
		err := w.Close()
		if err == nil || !hdfs.IsErrReplicating(err) || i == 6 {
			return err
		}
		time.Sleep(backoff)
		backoff *= 2
	}
}

func (a *hdfsAtomic) Abort() error {
	if a.done {
		return nil
	}
	a.done = true
	defer a.h.release(a.c)
	defer a.kept.Close()
	a.w.Close() // releases the lease; the file goes next
	if err := a.c.c.Remove(a.tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return a.h.pathError("abort", a.final, err)
	}
	return nil
}

// replayLog keeps the bytes of a file being written: the first
// hdfsReplayMemory in memory, the rest in a local temporary file.
type replayLog struct {
	mem   bytes.Buffer
	spill *os.File
}

func (l *replayLog) Write(p []byte) error {
	if l.spill == nil && l.mem.Len()+len(p) <= hdfsReplayMemory {
		l.mem.Write(p)
		return nil
	}
	if l.spill == nil {
		f, err := os.CreateTemp("", "spindle-hdfs-write-*")
		if err != nil {
			return err
		}
		l.spill = f
	}
	_, err := l.spill.Write(p)
	return err
}

// replay gives write everything kept, in order.
func (l *replayLog) replay(write func([]byte) error) error {
	for b := l.mem.Bytes(); len(b) > 0; b = b[min(len(b), 1<<20):] {
		if err := write(b[:min(len(b), 1<<20)]); err != nil {
			return err
		}
	}
	if l.spill == nil {
		return nil
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); ; {
		n, err := l.spill.ReadAt(buf, off)
		if n > 0 {
			if werr := write(buf[:n]); werr != nil {
				return werr
			}
			off += int64(n)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read back the local copy %s: %w", l.spill.Name(), err)
		}
	}
}

// Close removes the local copy.
func (l *replayLog) Close() {
	l.mem = bytes.Buffer{}
	if l.spill != nil {
		l.spill.Close()
		os.Remove(l.spill.Name())
		l.spill = nil
	}
}
