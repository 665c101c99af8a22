package eventlog

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/observe/jobview"
)

// A history lists jobs by their summaries (name, user, state, times), and
// a finished job's summary never changes; replaying a large job's whole
// log to list it took seconds per job (docs/scale.md). Close writes the
// summary beside the folded log, and a history lists finished jobs from it.

// summaryName is the finished job's summary, beside its folded log.
const summaryName = "summary.json"

// writeSummary writes the summary of the job whose events these are.
func writeSummary(ctx context.Context, f fsys.FS, dir string, events []jobview.Event) error {
	j := jobview.Replay(events)
	end := time.Now()
	if n := len(events); n > 0 {
		end = events[n-1].Time
	}
	b, err := json.Marshal(j.Summary(end))
	if err != nil {
		return err
	}
	return writeAtomic(ctx, f, path.Join(dir, summaryName), b)
}

// ReadSummary returns the summary of a finished job under dirURI, written
// when its log was folded; ok is false when there is none (a running job,
// or a log written before summaries were).
func ReadSummary(ctx context.Context, res *fsys.Resolver, dirURI, job string) (s jobview.Summary, ok bool, err error) {
	f, dir, err := res.Resolve(ctx, dirURI)
	if err != nil {
		return s, false, fmt.Errorf("event log directory %s: %w", dirURI, err)
	}
	name := path.Join(dir, job, summaryName)
	if _, err := f.Stat(ctx, name); err != nil {
		return s, false, nil
	}
	file, err := f.Open(ctx, name)
	if err != nil {
		return s, false, fmt.Errorf("open %s: %w", name, err)
	}
	defer file.Close()
	b, err := io.ReadAll(io.LimitReader(file, 1<<20))
	if err != nil {
		return s, false, fmt.Errorf("read %s: %w", name, err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, false, fmt.Errorf("job summary %s: %w", name, err)
	}
	return s, true, nil
}
