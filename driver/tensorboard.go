package driver

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spindle-ml/spindle/observe/jobview"
	"github.com/spindle-ml/spindle/observe/tfevents"
)

// openTensorBoard opens the job's TensorBoard run, dir/JOBID, for the
// values its ranks report. A directory it cannot write to is reported and
// left out: the job runs without its TensorBoard files rather than not at all.
func openTensorBoard(dir, jobID string, logger *slog.Logger) *tfevents.Writer {
	local, ok := strings.CutPrefix(dir, "file://")
	if !ok && strings.Contains(dir, "://") {
		logger.Warn("the job writes no TensorBoard files: spindle.tensorboard.dir must be a local path or file:// URI", "dir", dir)
		return nil
	}
	host, _ := os.Hostname()
	w, err := tfevents.Create(filepath.Join(local, jobID), host, time.Now())
	if err != nil {
		logger.Warn("the job writes no TensorBoard files", "dir", dir, "err", err)
		return nil
	}
	logger.Info("tensorboard events", "file", w.Path())
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
