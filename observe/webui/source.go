package webui

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/observe/eventlog"
	"github.com/spindle-ml/spindle/observe/jobview"
)

// ErrNotFound is returned by a Source for a job it does not have.
var ErrNotFound = errors.New("webui: no such job")

// Source is where the pages get their jobs.
type Source interface {
	// Jobs lists the jobs, newest first.
	Jobs(ctx context.Context) ([]jobview.Summary, error)
	// Job returns one job's model, or ErrNotFound.
	Job(ctx context.Context, id string) (*jobview.Job, error)
	// Live reports whether the source is one running driver (its pages
	// open on the job itself) rather than a history of many.
	Live() bool
}

// Live is the driver's source: the one job it runs.
type Live struct{ job *jobview.Job }

// NewLive returns a Source serving job.
func NewLive(job *jobview.Job) *Live { return &Live{job: job} }

var _ Source = (*Live)(nil)

// Jobs returns the one job.
func (l *Live) Jobs(context.Context) ([]jobview.Summary, error) {
	return []jobview.Summary{l.job.Summary(time.Now())}, nil
}

// Job returns the job when id is its id.
func (l *Live) Job(_ context.Context, id string) (*jobview.Job, error) {
	if id != l.job.ID() {
		return nil, ErrNotFound
	}
	return l.job, nil
}

// Live reports true.
func (l *Live) Live() bool { return true }

// History is the history server's source: every job whose event log is in
// one directory (local or HDFS). Finished jobs are replayed once and kept;
// running jobs are replayed again when their log has grown.
type History struct {
	res *fsys.Resolver
	dir string

	mu    sync.Mutex
	cache map[string]cachedJob
	// summaries are finished jobs' summaries, read from beside their logs.
	summaries map[string]jobview.Summary
}

type cachedJob struct {
	modified time.Time
	complete bool
	job      *jobview.Job
}

// NewHistory returns a Source over the event logs under dirURI.
func NewHistory(res *fsys.Resolver, dirURI string) *History {
	return &History{res: res, dir: dirURI, cache: map[string]cachedJob{}, summaries: map[string]jobview.Summary{}}
}

var _ Source = (*History)(nil)

// Live reports false.
func (h *History) Live() bool { return false }

// Jobs lists every job in the directory, newest first.
func (h *History) Jobs(ctx context.Context) ([]jobview.Summary, error) {
	found, err := eventlog.List(ctx, h.res, h.dir)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := make([]jobview.Summary, 0, len(found))
	for _, f := range found {
		if s, ok := h.summary(ctx, f); ok {
			out = append(out, s)
			continue
		}
		j, err := h.load(ctx, f)
		if err != nil {
			continue // a job whose log cannot be read is left off the list, not the whole list
		}
		s := j.Summary(now)
		if s.ID == "" {
			s.ID = f.ID
		}
		if !f.Complete && !jobview.IsFinal(s.State) && now.Sub(f.Modified) > staleAfter {
			// Its driver stopped writing without ending the job.
			s.State = "UNKNOWN"
		}
		out = append(out, s)
	}
	return out, nil
}

// summary returns a finished job's summary from beside its log, without
// replaying the log; ok is false when there is none.
func (h *History) summary(ctx context.Context, f eventlog.Job) (jobview.Summary, bool) {
	if !f.Complete {
		return jobview.Summary{}, false
	}
	h.mu.Lock()
	s, ok := h.summaries[f.ID]
	h.mu.Unlock()
	if ok {
		return s, true
	}
	s, ok, err := eventlog.ReadSummary(ctx, h.res, h.dir, f.ID)
	if err != nil || !ok {
		return jobview.Summary{}, false
	}
	if s.ID == "" {
		s.ID = f.ID
	}
	h.mu.Lock()
	h.summaries[f.ID] = s
	h.mu.Unlock()
	return s, true
}

// staleAfter is how long a running job's log may go unwritten before the
// list says its state is unknown (its driver died mid-run).
const staleAfter = 10 * time.Minute

// Job returns one job.
func (h *History) Job(ctx context.Context, id string) (*jobview.Job, error) {
	found, err := eventlog.List(ctx, h.res, h.dir)
	if err != nil {
		return nil, err
	}
	for _, f := range found {
		if f.ID == id {
			return h.load(ctx, f)
		}
	}
	return nil, ErrNotFound
}

func (h *History) load(ctx context.Context, f eventlog.Job) (*jobview.Job, error) {
	h.mu.Lock()
	c, ok := h.cache[f.ID]
	h.mu.Unlock()
	if ok && (c.complete || c.modified.Equal(f.Modified)) {
		return c.job, nil
	}
	events, err := eventlog.Read(ctx, h.res, h.dir, f.ID)
	if err != nil {
		return nil, err
	}
	j := jobview.Replay(events)
	h.mu.Lock()
	h.cache[f.ID] = cachedJob{modified: f.Modified, complete: f.Complete, job: j}
	h.mu.Unlock()
	return j, nil
}
