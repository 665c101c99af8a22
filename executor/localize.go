package executor

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/fsys"
)

// localizeProgress counts the bytes an executor reads while it puts its
// task's files, py-files and archives in place, for the heartbeats it
// sends meanwhile. A conda or venv archive of tens of thousands of files
// takes longer to fetch and unpack than the driver waits for a silent
// executor.
type localizeProgress struct {
	done, total atomic.Int64
}

// snapshot is the progress as a heartbeat carries it.
func (p *localizeProgress) snapshot() *driverpb.Localizing {
	return &driverpb.Localizing{DoneBytes: p.done.Load(), TotalBytes: p.total.Load()}
}

type localizeProgressKey struct{}

// withLocalizeProgress returns ctx carrying p, so that the files opened
// under it (openCounted) count into p wherever they are read.
func withLocalizeProgress(ctx context.Context, p *localizeProgress) context.Context {
	return context.WithValue(ctx, localizeProgressKey{}, p)
}

// openCounted opens name on fs; when ctx carries a localizeProgress, the
// file's size counts into its total and what is read from it into its
// done bytes.
func openCounted(ctx context.Context, fs fsys.FS, name string) (fsys.File, error) {
	f, err := fs.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	p := localizeProgressOf(ctx)
	if p == nil {
		return f, nil
	}
	p.expect(f.Size())
	return countedFile{File: f, p: p}, nil
}

// localizeProgressOf is the progress ctx carries, or nil.
func localizeProgressOf(ctx context.Context) *localizeProgress {
	p, _ := ctx.Value(localizeProgressKey{}).(*localizeProgress)
	return p
}

// expect adds a file of size bytes to those to read; p may be nil.
func (p *localizeProgress) expect(size int64) {
	if p != nil && size > 0 {
		p.total.Add(size)
	}
}

// read counts n bytes read; p may be nil.
func (p *localizeProgress) read(n int) {
	if p != nil {
		p.done.Add(int64(n))
	}
}

// countedFile counts its sequential reads into a localizeProgress.
type countedFile struct {
	fsys.File
	p *localizeProgress
}

func (f countedFile) Read(b []byte) (int, error) {
	n, err := f.File.Read(b)
	f.p.read(n)
	return n, err
}

// localizeStop is how the driver ended a task while it was localizing.
type localizeStop struct {
	why      string
	finished bool
}

// whileLocalizing runs setup (fetching and unpacking the task's files)
// while heartbeating "localizing: N of M bytes" to the driver, so that a
// long set-up is shown as what it is rather than taken for a lost
// executor. setup's context ends when the driver stops the job or cannot
// be reached for its timeout; the stop says why.
func (e *Executor) whileLocalizing(ctx context.Context, t *Task, id identity, setup func(context.Context) error) (*localizeStop, error) {
	prog := &localizeProgress{}
	setupCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stop *localizeStop
	hbDone := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Written before wg.Done, read after wg.Wait.
		stop = e.localizingHeartbeats(setupCtx, hbDone, t, id, prog)
		if stop != nil {
			cancel()
		}
	}()
	start := time.Now()
	err := setup(withLocalizeProgress(setupCtx, prog))
	close(hbDone)
	wg.Wait()
	if stop != nil {
		// The executor then exits quietly, as a stopped one does; its own
		// log (a YARN container's stderr) says what it was doing.
		e.logger.Info("stopped while localizing the task's files", "reason", stop.why,
			"read_bytes", prog.done.Load(), "of_bytes", prog.total.Load(), "took", time.Since(start).Round(time.Millisecond))
		return stop, nil
	}
	if err != nil {
		return nil, err
	}
	if n := prog.done.Load(); n > 0 {
		e.logger.Info("localized the task's files", "bytes", n, "took", time.Since(start).Round(time.Millisecond))
	}
	return nil, nil
}

// localizingHeartbeats sends a heartbeat with prog every interval until
// done closes or ctx ends. It returns a stop when the driver says stop or
// has not answered for the driver timeout.
func (e *Executor) localizingHeartbeats(ctx context.Context, done <-chan struct{}, t *Task, id identity, prog *localizeProgress) *localizeStop {
	interval := heartbeatInterval(t)
	timeout := driverTimeout(t)
	lastOK := time.Now()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-done:
			return nil
		case <-tick.C:
		}
		callCtx, cancel := context.WithTimeout(ctx, interval)
		resp, err := e.client.Heartbeat(callCtx, &driverpb.HeartbeatRequest{
			ExecutorId: e.cfg.ID, Rank: int32(id.rank), Localizing: prog.snapshot(),
			CredentialsGeneration: e.credGen.Load(),
		})
		cancel()
		switch {
		case err == nil && resp.GetStop():
			why, _, _ := strings.Cut(resp.GetReason(), "\n")
			if resp.GetFinished() {
				return &localizeStop{why: why, finished: true}
			}
			return &localizeStop{why: "the driver stopped the job: " + why}
		case err == nil:
			e.takeCredentials(resp.GetCredentials())
			lastOK = time.Now()
		case ctx.Err() != nil:
			return nil
		case time.Since(lastOK) > timeout:
			return &localizeStop{why: fmt.Sprintf("lost the driver at %s while localizing: no answer for %s (%v)",
				e.cfg.DriverAddr, time.Since(lastOK).Round(time.Second), err)}
		}
	}
}

// driverTimeout is how long the executor goes on without an answer from
// the driver before it gives the driver up.
func driverTimeout(t *Task) time.Duration {
	interval := heartbeatInterval(t)
	if timeout := time.Duration(t.DriverTimeoutMillis) * time.Millisecond; timeout > interval {
		return timeout
	}
	return 6 * interval
}
