package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/observe/jobview"
)

// kindResult is the kind of an events file's last line: how spindle submit ended.
const kindResult = "result"

// eventsFile writes a job's events as JSON lines to a file that a program
// driving spindle submit (the Python API) follows while the job runs:
// the driver's events (submitted, with the job id and any push endpoint;
// web_ui; executor and job states; progress; scalars) as they happen, but
// not the ranks' output lines, which stay on stdout and stderr; and last a
// "result" line. Each line is written whole with one write.
type eventsFile struct {
	mu     sync.Mutex
	f      *os.File
	closed bool // finish was called
}

// resultEvent is the events file's last line.
type resultEvent struct {
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	// JobID is empty when submit stopped before the job had one.
	JobID    string `json:"job_id,omitempty"`
	State    string `json:"state"`     // SUCCEEDED, FAILED or KILLED, as jobview's
	ExitCode int    `json:"exit_code"` // spindle submit's exit status
	Message  string `json:"message"`
	// FailedRank and what follows describe the rank the failure is laid
	// on; FailedRank is absent when the failure names none and -1 when its
	// executor failed before it got a rank.
	FailedRank *int   `json:"failed_rank,omitempty"`
	Host       string `json:"host,omitempty"`
	Executor   string `json:"executor,omitempty"`
	RankExit   int    `json:"rank_exit_code,omitempty"`
	Signal     string `json:"signal,omitempty"`
	StderrTail string `json:"stderr_tail,omitempty"`
}

// openEvents creates (or empties) the events file at path, mode 0600.
func openEvents(path string) (*eventsFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--events-file: %w", err)
	}
	return &eventsFile{f: f}, nil
}

// record writes ev unless it is an output line. It is driver.Config.OnEvent.
func (e *eventsFile) record(ev jobview.Event) {
	if ev.Kind == jobview.KindLog {
		return
	}
	e.write(ev)
}

func (e *eventsFile) write(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return // every event type marshals; nothing to report to
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// A failed write leaves the reader without a line, which it reports.
	_, _ = e.f.Write(append(b, '\n'))
}

// finish writes the result line and closes the file.
func (e *eventsFile) finish(jobID string, runErr error, msg string, code int) error {
	r := resultEvent{Time: time.Now(), Kind: kindResult, JobID: jobID, ExitCode: code, Message: msg}
	switch code {
	case 0:
		r.State = jobview.StateSucceeded
	case exitInterrupted:
		r.State = jobview.StateKilled
	default:
		r.State = jobview.StateFailed
	}
	if f, ok := driver.FailedRank(runErr); ok {
		r.FailedRank = &f.Rank
		r.Host, r.Executor, r.RankExit, r.Signal, r.StderrTail = f.Host, f.Executor, f.ExitCode, f.Signal, f.StderrTail
	}
	e.write(r)
	e.closed = true
	if err := e.f.Close(); err != nil {
		return fmt.Errorf("--events-file: %w", err)
	}
	return nil
}
