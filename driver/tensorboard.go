package driver

import (
	"context"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/observe/jobview"
	"github.com/spindle-ml/spindle/observe/tfevents"
)

// tensorBoard is where a job's reported values go as TensorBoard events:
// one event file growing on a local disk, or segments on HDFS.
type tensorBoard interface {
	Scalars(now time.Time, step int64, values map[string]float64) error
	Close(ctx context.Context) error
}

// localTensorBoard is a local event file, which needs no context to close.
type localTensorBoard struct{ *tfevents.Writer }

func (l localTensorBoard) Close(context.Context) error { return l.Writer.Close() }

var (
	_ tensorBoard = localTensorBoard{}
	_ tensorBoard = (*tfevents.SegmentWriter)(nil)
)

// openTensorBoard opens the job's TensorBoard run, dir/JOBID, for the
// values its ranks report: dir is a local path, a file:// URI, or a URI of
// another file system the driver reads (hdfs://), where the events are
// published as segments every publish interval. A directory it cannot
// write to is reported and left out: the job runs without its TensorBoard
// files rather than not at all.
func openTensorBoard(ctx context.Context, res *fsys.Resolver, dir, jobID string, publish time.Duration, logger *slog.Logger) tensorBoard {
	host, _ := os.Hostname()
	local, ok := strings.CutPrefix(dir, "file://")
	if ok || !strings.Contains(dir, "://") {
		w, err := tfevents.Create(filepath.Join(local, jobID), host, time.Now())
		if err != nil {
			logger.Warn("the job writes no TensorBoard files", "dir", dir, "err", err)
			return nil
		}
		logger.Info("tensorboard events", "file", w.Path())
		return localTensorBoard{w}
	}
	fs, name, err := res.Resolve(ctx, dir)
	if err != nil {
		logger.Warn("the job writes no TensorBoard files: spindle.tensorboard.dir is not a directory the driver can write", "dir", dir, "err", err)
		return nil
	}
	w, err := tfevents.CreateSegments(ctx, fs, path.Join(name, jobID), host, time.Now(), publish,
		logger.With("component", "tensorboard"))
	if err != nil {
		logger.Warn("the job writes no TensorBoard files", "dir", dir, "err", err)
		return nil
	}
	logger.Info("tensorboard events", "dir", fsys.JoinURI(dir, jobID), "publish_every", publish)
	return w
}

// writeScalars writes a rank's reported values, each under the tag
// NAME/rank N, so TensorBoard charts every rank's NAME together.
func (o *observer) writeScalars(ev jobview.Event) {
	tagged := make(map[string]float64, len(ev.Values))
	for name, v := range ev.Values {
		tagged[name+"/rank "+strconv.Itoa(ev.Rank)] = v
	}
	if err := o.tb.Scalars(ev.Time, ev.Step, tagged); err != nil {
		o.logger.Warn("tensorboard events not written", "err", err)
	}
}
