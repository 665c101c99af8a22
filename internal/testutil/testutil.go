package testutil

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// EnvTimescale names the variable that stretches every test timing.
const EnvTimescale = "SPINDLE_TEST_TIMESCALE"

var (
	scaleOnce sync.Once
	scale     float64
	scaleErr  error
)

// Timescale returns the factor from SPINDLE_TEST_TIMESCALE, 1 when the
// variable is unset. A value that is not a positive number is reported
// by Scale's callers through the test, not ignored.
func Timescale() (float64, error) {
	scaleOnce.Do(func() { scale, scaleErr = parseTimescale(os.Getenv(EnvTimescale)) })
	return scale, scaleErr
}

func parseTimescale(s string) (float64, error) {
	if s == "" {
		return 1, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || f > 1000 {
		return 1, fmt.Errorf("%s=%q: want a positive number up to 1000", EnvTimescale, s)
	}
	return f, nil
}

// Scale returns d stretched by the timescale and by how busy the machine
// is now (LoadStretch). Use it for every duration a test configures and
// waits on; an invalid SPINDLE_TEST_TIMESCALE panics, which fails the
// test that asked with the variable named.
func Scale(d time.Duration) time.Duration {
	f, err := Timescale()
	if err != nil {
		panic(err)
	}
	return time.Duration(float64(d) * f * LoadStretch())
}

// pollEvery is how long WaitFor sleeps between two checks, at most.
const pollEvery = 50 * time.Millisecond

// WaitFor calls cond until it returns nil or a Budget of timeout is
// spent, and then fails t with the last error cond returned. The first
// check is immediate; later ones back off from 1ms to 50ms so fast
// conditions cost little and slow ones do not spin a loaded machine.
func WaitFor(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	if err := Poll(timeout, cond); err != nil {
		t.Fatal(err)
	}
}

// Poll is WaitFor for code that must not call t.Fatal (a goroutine other
// than the test's, a helper process): it returns an error quoting the
// condition's last error instead. Its deadline is a Budget: load that
// rises while it waits stretches it.
func Poll(timeout time.Duration, cond func() error) error {
	budget := NewBudget(timeout)
	sleep := time.Millisecond
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if budget.Spent() {
			return fmt.Errorf("timed out after %s: %w", budget, err)
		}
		time.Sleep(sleep)
		sleep = min(2*sleep, pollEvery)
	}
}

// Holds adapts a boolean condition to WaitFor: while ok returns false the
// error says "no <what> yet", which is what WaitFor quotes at its deadline.
func Holds(what string, ok func() bool) func() error {
	return func() error {
		if ok() {
			return nil
		}
		return errors.New("no " + what + " yet")
	}
}

// PacedEpochs is how many epochs of rowsPerRank rows, read in batches of
// batchRows by a training process that sleeps delay per batch, last at
// least d. A job that must outlive a deadline (a token's lifetime) is
// paced so by sleeps rather than by work, which a loaded machine slows
// and which costs CPU all along.
func PacedEpochs(d time.Duration, rowsPerRank, batchRows int, delay time.Duration) int {
	perEpoch := time.Duration((rowsPerRank+batchRows-1)/batchRows) * delay
	return int((d + perEpoch - 1) / perEpoch)
}
