package push

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// rankStream is what the endpoint keeps of one rank's stream: whether it
// was opened, the cancel of the DoGet serving it now, and, with a journal,
// every batch sent to the rank so far, which a later DoGet of the same
// rank (a restarted executor) reads again before the live rows.
type rankStream struct {
	// serving is held by the DoGet that serves the rank; a newer DoGet
	// cancels the older one and waits for it here.
	serving sync.Mutex
	// cancel ends the DoGet serving the rank now; guarded by Server.mu.
	cancel context.CancelFunc
	opened bool // guarded by Server.mu

	path string // the journal file; empty without a journal
	file *os.File
	w    *ipc.Writer
	// broken is why the journal lacks a batch sent to the rank: the
	// rank's stream cannot be sent again whole.
	broken error
}

// record appends a batch about to be sent to the rank's journal, so that
// it is not lost with the executor it is sent to. serving is held.
func (rs *rankStream) record(schema *arrow.Schema, rec arrow.RecordBatch) (err error) {
	if rs.path == "" || rs.broken != nil {
		return nil
	}
	defer func() { rs.broken = err }()
	if rs.w == nil {
		f, err := os.OpenFile(rs.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("create the rank's journal of pushed rows: %w", err)
		}
		rs.file, rs.w = f, ipc.NewWriter(f, ipc.WithSchema(schema))
	}
	if err := rs.w.Write(rec); err != nil {
		return fmt.Errorf("write the rank's journal of pushed rows %s: %w", rs.path, err)
	}
	return nil
}

// replay sends every batch of the rank's journal, in the order they were
// first sent, through send. serving is held, so nothing is appended
// meanwhile.
func (rs *rankStream) replay(send func(arrow.RecordBatch) error) (int64, error) {
	if rs.w == nil {
		return 0, nil
	}
	f, err := os.Open(rs.path)
	if err != nil {
		return 0, fmt.Errorf("open the rank's journal of pushed rows: %w", err)
	}
	defer f.Close()
	rd, err := ipc.NewReader(f)
	if err != nil {
		return 0, fmt.Errorf("read the rank's journal of pushed rows %s: %w", rs.path, err)
	}
	defer rd.Release()
	var rows int64
	for rd.Next() {
		rec := rd.RecordBatch()
		if err := send(rec); err != nil {
			return rows, err
		}
		rows += rec.NumRows()
	}
	if err := rd.Err(); err != nil && !errors.Is(err, io.EOF) {
		return rows, fmt.Errorf("read the rank's journal of pushed rows %s: %w", rs.path, err)
	}
	return rows, nil
}

// close closes and removes the rank's journal.
func (rs *rankStream) close() error {
	if rs.w == nil {
		return nil
	}
	err := rs.w.Close()
	if cerr := rs.file.Close(); err == nil {
		err = cerr
	}
	if rerr := os.Remove(rs.path); err == nil && rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = rerr
	}
	rs.w, rs.file = nil, nil
	return err
}

// newRankStreams makes the ranks' stream states, with journals in dir
// when it is not empty.
func newRankStreams(ranks int, dir string) []*rankStream {
	out := make([]*rankStream, ranks)
	for r := range out {
		out[r] = &rankStream{}
		if dir != "" {
			out[r].path = filepath.Join(dir, fmt.Sprintf("rank-%d.arrow", r))
		}
	}
	return out
}
