package chaos

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/spindle-ml/spindle/internal/rowsum"
)

// The elastic job with input reads wideRows row ids of 33 columns (12
// CSV files), 120 batches of 1,000 a rank an epoch in the world of 4: the
// feed's 4 MB socket buffer holds about a quarter of an epoch, so that a
// kill within the harness's first 1.2 s falls in the epoch the survivors'
// feeds are still in.
const wideRows, wideEpochs = 480000, 3

// The lines e2e/rowshrink prints: once its communicator formed, once it
// went on in a smaller world, and at its end.
var (
	rowshrinkJoined = regexp.MustCompile(`rowshrink started pid=(\d+) rank=\d+ world=4 generation=0`)
	rowshrinkWentOn = regexp.MustCompile(`rowshrink went on pid=(\d+) rank=\d+ world=3 was=\d+/4 epoch=(\d+) batches=(\d+)`)
	rowshrinkFinal  = regexp.MustCompile(`rowshrink final pid=(\d+) rank=\d+ world=3 `)
)

var wideOnce struct {
	sync.Once
	glob string
	err  error
}

// wideRowIDs writes the job's input into data once: ids 0 to wideRows-1
// and 32 small features each, in 12 files of equal rows, so that every
// rank of 4 (and of 3) gets whole batches.
func wideRowIDs(data string) (string, error) {
	wideOnce.Do(func() {
		dir := filepath.Join(data, "wide")
		if wideOnce.err = os.MkdirAll(dir, 0o755); wideOnce.err != nil {
			return
		}
		const files = 12
		per := wideRows / files
		for f := range files {
			if wideOnce.err = writeWideFile(filepath.Join(dir, fmt.Sprintf("part-%02d.csv", f)), f*per, (f+1)*per); wideOnce.err != nil {
				return
			}
		}
		wideOnce.glob = filepath.Join(dir, "*.csv")
	})
	return wideOnce.glob, wideOnce.err
}

// writeWideFile writes ids from to to-1, each with 32 features.
func writeWideFile(path string, from, to int) error {
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(file)
	w.WriteString("id")
	for c := range 32 {
		fmt.Fprintf(w, ",f%d", c)
	}
	w.WriteString("\n")
	for id := from; id < to; id++ {
		w.WriteString(strconv.Itoa(id))
		for c := range 32 {
			w.WriteString(",")
			w.WriteString(strconv.Itoa((id + c) % 97))
		}
		w.WriteString("\n")
	}
	if err := w.Flush(); err != nil {
		file.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return file.Close()
}

// elasticShrinkInput is an elastic job of 4 allreducing workers with
// input (e2e/rowshrink: every step allreduces its batch's row checksums)
// that goes on without a lost one in place; even batches are off, so
// that the lost rank's rest, dealt at whatever batch the kill came, is
// fed whole and once, not padded. It reads the default feed (shared
// memory on), which sends an epoch far ahead of training: the epoch stays
// open for the deal because the feeds end it only once every process
// asked beyond its last batch. Its recovery is the last survivor going
// on in the world of 3 (re-formed, caught up, its report sent).
func elasticShrinkInput() fault {
	return fault{name: "elastic: allreducing rank of 4 (row ids)", want: 4, recovers: true, alone: true, check: shrunkInPlaceWithRows,
		args: func(_, data string) []string {
			input, err := wideRowIDs(data)
			if err != nil {
				input = "the row ids could not be written: " + err.Error()
			}
			return []string{"submit", "--master", "local[4]", "--conf", "spindle.log.level=warn", "--num-executors", "2:4",
				"--input", input, "--label-column", "id", "--feed", "tensor", "--batch-rows", "1000",
				"--epochs", strconv.Itoa(wideEpochs), "--shuffle", "--seed", "4",
				"--conf", "spindle.feed.shuffleBufferRows=4000", "--conf", "spindle.feed.prefetchBatches=2",
				"--conf", "spindle.feed.evenBatches=off",
				"--conf", "spindle.failure.policy=elastic", "--conf", "spindle.failure.shrinkInPlace=true",
				"--", rowshrinkBin, "--epochs", strconv.Itoa(wideEpochs), "--crash-epoch", "-1", "--pause", "20ms"}
		},
		victims: func(*exec.Cmd) []int { return pids(rowshrinkBin) },
		ready:   regexp.MustCompile(`(?s)(rowshrink started .*){4}`),
		trained: regexp.MustCompile(`(?s)(rowshrink went on .*){3}`),
	}
}

// shrunkInPlaceWithRows checks that the three survivors went on in place
// with their processes, from one state (the same epoch and batch: none
// lost more than the step that failed), and that the world trained every
// row exactly once in each epoch.
func shrunkInPlaceWithRows(stdout string) error {
	if err := wentOnInPlace(stdout, rowshrinkJoined, rowshrinkWentOn, rowshrinkFinal); err != nil {
		return err
	}
	at := map[string]bool{}
	for _, m := range rowshrinkWentOn.FindAllStringSubmatch(stdout, -1) {
		at["epoch "+m[2]+" batch "+m[3]] = true
	}
	if len(at) != 1 {
		return fmt.Errorf("the survivors went on from %d different places, want 1", len(at))
	}
	return wideRowsOnce(stdout)
}

// wideRowsOnce checks the last world's sums: every epoch took each row
// once.
func wideRowsOnce(stdout string) error {
	n, err := rowsum.Check(stdout, 1, wideEpochs, wideRows)
	rowChecks.epochs += n
	if err != nil {
		rowChecks.wrong += max(1, strings.Count(err.Error(), "epoch "))
	}
	return err
}

// elasticRestartInput is elasticShrinkInput without
// spindle.failure.shrinkInPlace, its baseline: the gang restarts with 3
// new processes that start over (the job saves no checkpoint). Its
// recovery is the three joining their world.
func elasticRestartInput() fault {
	f := withoutShrinkInPlace(elasticShrinkInput())
	f.name = "elastic gang restarted: allreducing rank of 4 (row ids)"
	f.check = func(stdout string) error {
		if got := rowshrinkFinal.FindAllStringSubmatch(stdout, -1); len(got) != 3 {
			return fmt.Errorf("%d final lines in a world of 3, want 3", len(got))
		}
		return wideRowsOnce(stdout)
	}
	f.trained = regexp.MustCompile(`(?s)(rowshrink started pid=\d+ rank=\d+ world=3 generation=1.*){3}`)
	return f
}
