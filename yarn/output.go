package yarn

import (
	"bytes"
	"context"
	"io"
	"sync"
	"time"
)

// JobResult is how a cluster-mode job ended, as `spindle submit` reports
// it: its exit status (0 succeeded, 1 failed, 2 bad input found before
// anything ran, 130 interrupted) and the line that says why.
type JobResult struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// status is the application's final status for YARN.
func (r JobResult) status() string {
	switch r.Code {
	case 0:
		return "SUCCEEDED"
	case 130:
		return "KILLED"
	}
	return "FAILED"
}

// outputLine is one line the driver printed.
type outputLine struct {
	Err  bool   `json:"err,omitempty"`
	Text string `json:"text"`
}

// amOutput is the answer of GET /v1/output: the lines after the asked
// index, and the job's result once every line has been given.
type amOutput struct {
	Next int `json:"next"`
	// Dropped counts lines that were gone (beyond the kept window) before
	// the caller asked for them.
	Dropped int          `json:"dropped,omitempty"`
	Lines   []outputLine `json:"lines,omitempty"`
	Done    *JobResult   `json:"done,omitempty"`
}

// Limits of the output log.
const (
	outputKeep     = 20000    // lines kept for a gateway that falls behind
	outputMaxLine  = 64 << 10 // longer lines are cut
	outputMaxBatch = 2000     // lines per answer
	readerGone     = 30 * time.Second
)

// outputLog keeps what a cluster-mode driver prints, for the gateway's
// `spindle submit` to stream: every line of its stdout and stderr (its
// logs, progress lines and the training processes' output), then the
// job's result.
type outputLog struct {
	mu       sync.Mutex
	first    int // index of lines[0]
	lines    []outputLine
	partial  [2][]byte
	done     *JobResult
	drained  bool // the result has been given to a reader
	noReader bool // the gateway said it stops reading
	lastRead time.Time
	more     chan struct{}
}

// newOutputLog returns an empty log. Its reader counts as present from
// now: a job that ends before the gateway's first read (one shorter than
// the gateway's report polling) still waits for it, while a gateway that
// never reads is given up on after readerGone, as one that stopped.
func newOutputLog() *outputLog { return &outputLog{more: make(chan struct{}), lastRead: time.Now()} }

// writer returns a writer whose lines go to the log, as stderr lines when
// toErr is set.
func (l *outputLog) writer(toErr bool) io.Writer { return outputWriter{l, toErr} }

type outputWriter struct {
	l     *outputLog
	toErr bool
}

func (w outputWriter) Write(p []byte) (int, error) {
	w.l.write(w.toErr, p)
	return len(p), nil
}

func (l *outputLog) write(toErr bool, p []byte) {
	i := 0
	if toErr {
		i = 1
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	buf := append(l.partial[i], p...)
	added := false
	for {
		nl := bytes.IndexByte(buf, '\n')
		if nl < 0 {
			break
		}
		l.addLocked(toErr, buf[:nl])
		buf = buf[nl+1:]
		added = true
	}
	if len(buf) > outputMaxLine {
		l.addLocked(toErr, buf)
		buf = nil
		added = true
	}
	l.partial[i] = append([]byte(nil), buf...)
	if added {
		l.wakeLocked()
	}
}

func (l *outputLog) addLocked(toErr bool, line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(line) > outputMaxLine {
		line = line[:outputMaxLine]
	}
	l.lines = append(l.lines, outputLine{Err: toErr, Text: string(line)})
	if over := len(l.lines) - outputKeep; over > 0 {
		l.lines = append([]outputLine(nil), l.lines[over:]...)
		l.first += over
	}
}

func (l *outputLog) wakeLocked() {
	close(l.more)
	l.more = make(chan struct{})
}

// finish records the job's result, after any unfinished last lines.
func (l *outputLog) finish(r JobResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, p := range l.partial {
		if len(p) > 0 {
			l.addLocked(i == 1, p)
			l.partial[i] = nil
		}
	}
	l.done = &r
	l.wakeLocked()
}

// stopReading records that the gateway reads no more (it is stopping the
// application).
func (l *outputLog) stopReading() {
	l.mu.Lock()
	l.noReader = true
	l.mu.Unlock()
}

// since waits up to wait for lines after index n and returns them; the
// result comes with the last of them.
func (l *outputLog) since(ctx context.Context, n int, wait time.Duration) amOutput {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		l.mu.Lock()
		l.lastRead = time.Now()
		end := l.first + len(l.lines)
		if n > end || n < 0 {
			n = end
		}
		if n < end || l.done != nil {
			out := amOutput{}
			if n < l.first {
				out.Dropped = l.first - n
				n = l.first
			}
			stop := min(end, n+outputMaxBatch)
			out.Lines = append(out.Lines, l.lines[n-l.first:stop-l.first]...)
			out.Next = stop
			if stop == end && l.done != nil {
				out.Done = l.done
				l.drained = true
			}
			l.mu.Unlock()
			return out
		}
		more := l.more
		l.mu.Unlock()
		select {
		case <-more:
		case <-t.C:
			return amOutput{Next: n}
		case <-ctx.Done():
			return amOutput{Next: n}
		}
	}
}

// waitDrained waits, up to within, until a reader has had the result; it
// returns at once when nobody has read lately.
func (l *outputLog) waitDrained(ctx context.Context, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		l.mu.Lock()
		drained, gone := l.drained, l.noReader || time.Since(l.lastRead) > readerGone
		l.mu.Unlock()
		if drained || gone {
			return drained
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}
