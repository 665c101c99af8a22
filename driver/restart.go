package driver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/feed/wire"
	"github.com/spindle-ml/spindle/observe/jobview"
)

// Failure policies (spindle.failure.policy).
const (
	// PolicyFail ends the job at its first failure.
	PolicyFail = "fail"
	// PolicyRestart stops every rank, starts a new gang (a new
	// generation) and lets each process resume from its latest
	// checkpoint, up to MaxRestarts times.
	PolicyRestart = "restart"
)

// lossError is a failure the roster lays at one executor's door: its
// training process failed, or it exited or was lost.
type lossError struct {
	msg      string
	executor string
	// host is where it ran, as the cluster manager names hosts when it
	// said, else as the executor registered.
	host string
	// blameless marks a loss that was not the job's fault (Event.Blameless).
	blameless bool
	// rank is the failed member's rank, -1 when it never registered.
	rank       int
	exitCode   int
	signal     string
	stderrTail string
}

func (e *lossError) Error() string { return e.msg }

// loss returns the failure msg of m.
func (m *member) loss(msg string, blameless bool) error {
	rank := -1
	if m.registered {
		rank = m.rank
	}
	return &lossError{msg: msg, executor: m.id, host: cmp.Or(m.placedOn, m.host), blameless: blameless,
		rank: rank, exitCode: int(m.exitCode), signal: m.signal, stderrTail: m.stderrTail}
}

// RankFailure describes the rank a job's failure is laid on, for programs
// that drive the driver (spindle submit --events-file, the Python API).
type RankFailure struct {
	// Rank is the failed rank, -1 when its executor failed before it
	// registered and got one.
	Rank     int
	Host     string
	Executor string
	// ExitCode and Signal say how its training process ended (0 and ""
	// when it did not exit: a lost executor).
	ExitCode int
	Signal   string
	// StderrTail is the last lines its training process wrote on stderr.
	StderrTail string
}

// FailedRank returns the rank err lays a job's failure on, when it names one.
func FailedRank(err error) (RankFailure, bool) {
	var loss *lossError
	if !errors.As(err, &loss) {
		return RankFailure{}, false
	}
	return RankFailure{Rank: loss.rank, Host: loss.host, Executor: loss.executor,
		ExitCode: loss.exitCode, Signal: loss.signal, StderrTail: loss.stderrTail}, true
}

// placeOf names where the executor of a loss ran, asking the cluster
// manager when it knows (its events may come after the failure itself).
func (d *Driver) placeOf(loss *lossError) {
	if n, ok := d.cm.(NodeNamer); ok && loss != nil {
		if node := n.NodeOf(loss.executor); node != "" {
			loss.host = node
		}
	}
}

// restartCounts follows a job's restarts: those its failures used
// (against MaxRestarts), those after losses that were not its fault
// (against MaxBlamelessRestarts), and the failures on each host.
type restartCounts struct {
	counted, blameless int
	// first is the job's first generation (Driver.firstGeneration).
	first        int
	hostFailures map[string]int
	excluded     []string
}

// generations runs the job's gang, and under PolicyRestart new gangs after
// failures, until one succeeds, a failure is not one a restart can help,
// or the restarts are used up. A loss that was not the job's fault (a
// preempted container, a lost node, a standalone worker that left) does
// not count against MaxRestarts; under PolicyFail it fails the job all the
// same. A host where the job failed HostMaxFailures times is left out of
// the later generations' placements.
func (d *Driver) generations(ctx context.Context, w *world, served map[string]string, start time.Time) error {
	c := d.cfg
	rc := restartCounts{hostFailures: map[string]int{}, first: d.firstGeneration()}
	for gen := rc.first; ; gen++ {
		from, err := d.resumeFrom(ctx, w.slots)
		if err != nil {
			return err
		}
		launched, err := d.generation(ctx, gen, w, served, start, &rc, from, c.RegistrationTimeout)
		if err == nil {
			return nil
		}
		if err := d.afterFailure(ctx, gen, err, launched, &rc); err != nil {
			return err
		}
	}
}

// afterFailure decides whether a failed generation is followed by another
// (nil) or ends the job (the error to end it with), counts the restart
// and the host's failure, and says so.
func (d *Driver) afterFailure(ctx context.Context, gen int, err error, launched bool, rc *restartCounts) error {
	c := d.cfg
	var loss *lossError
	errors.As(err, &loss)
	d.placeOf(loss)
	blameless := loss != nil && loss.blameless
	switch {
	case c.FailurePolicy == PolicyFail || !launched || !restartable(err) || ctx.Err() != nil:
		if n := gen - rc.first; n > 0 {
			return fmt.Errorf("%w (generation %d, after %d restart%s)", err, gen, n, plural(n))
		}
		return err
	case blameless && rc.blameless >= c.MaxBlamelessRestarts:
		return fmt.Errorf("%w (the job was restarted %d time%s after losses that were not its fault, spindle.failure.maxBlamelessRestarts)",
			err, rc.blameless, plural(rc.blameless))
	case !blameless && rc.counted >= c.MaxRestarts:
		return fmt.Errorf("%w (the job was restarted %d time%s, spindle.failure.maxRestarts)", err, rc.counted, plural(rc.counted))
	}
	reason, detail := splitReason(err.Error())
	var restart string
	if blameless {
		rc.blameless++
		restart = fmt.Sprintf("not counted against spindle.failure.maxRestarts; %d of %d such restarts", rc.blameless, c.MaxBlamelessRestarts)
	} else {
		rc.counted++
		restart = fmt.Sprintf("restart %d of %d", rc.counted, c.MaxRestarts)
	}
	d.logger.Warn("job failed; restarting it", "generation", gen+1, "restart", restart, "reason", err.Error())
	if c.Console != nil {
		c.Console.Eprintln(fmt.Sprintf("job %s failed: %s; restarting every rank (%s), each from its latest checkpoint%s",
			c.JobID, reason, restart, detail))
	}
	if h := rc.failedOn(loss, c.HostMaxFailures); h != "" {
		d.logger.Warn("host failed the job repeatedly; later generations are placed elsewhere", "host", h, "failures", rc.hostFailures[h])
		if c.Console != nil {
			c.Console.Eprintln(fmt.Sprintf("host %s failed the job %d times (spindle.failure.hostMaxFailures): its executors are placed elsewhere from now on",
				h, rc.hostFailures[h]))
		}
	}
	if d.obs != nil {
		d.obs.record(jobview.Event{Kind: jobview.KindRestart, Generation: gen + 1, Reason: reason})
	}
	return nil
}

// failedOn counts a failure against its host and returns the host when
// that failure puts it on the excluded list.
func (rc *restartCounts) failedOn(loss *lossError, max int) string {
	if loss == nil || loss.blameless || loss.host == "" || max <= 0 {
		return ""
	}
	rc.hostFailures[loss.host]++
	if rc.hostFailures[loss.host] < max || slices.Contains(rc.excluded, loss.host) {
		return ""
	}
	rc.excluded = append(rc.excluded, loss.host)
	return loss.host
}

// restartable says whether a restart could help: not for bad input or
// settings, an interrupted or timed-out job.
func restartable(err error) bool {
	for _, e := range []error{ErrInterrupted, ErrTimedOut, ErrConfig, feed.ErrInput, wire.ErrNotNumeric} {
		if errors.Is(err, e) {
			return false
		}
	}
	return true
}

// generationSlots gives a generation's executors ids of their own, so a
// cluster manager never mistakes them for the ones that came before.
func generationSlots(slots []slot, gen int) []slot {
	if gen == 0 {
		return slots
	}
	out := make([]slot, len(slots))
	for i, s := range slots {
		s.id = fmt.Sprintf("%s-g%d", s.id, gen)
		out[i] = s
	}
	return out
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// splitReason cuts a failure into its first line, which the restart
// notice names, and what follows it (a rank's last lines of stderr, with
// the clause that introduces them), which the notice ends with so that a
// process that failed still says why.
func splitReason(msg string) (reason, detail string) {
	reason, rest, multi := strings.Cut(msg, "\n")
	if !multi {
		return reason, ""
	}
	if i := strings.LastIndex(reason, "; "); i >= 0 && strings.HasSuffix(reason, ":") {
		return reason[:i], reason[i:] + "\n" + rest
	}
	return reason, "\n" + rest
}
