package testutil

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseTimescale(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		bad  bool
	}{
		{"", 1, false}, {"1", 1, false}, {"2.5", 2.5, false},
		{"0", 0, true}, {"-1", 0, true}, {"fast", 0, true}, {"1e9", 0, true},
	} {
		got, err := parseTimescale(c.in)
		if c.bad {
			if err == nil || !strings.Contains(err.Error(), EnvTimescale) {
				t.Errorf("%q: err %v, want one naming %s", c.in, err, EnvTimescale)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: got %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

// TestPollQuotesTheLastError: at the deadline the error says what the
// condition last reported, not merely that time ran out.
func TestPollQuotesTheLastError(t *testing.T) {
	n := 0
	err := Poll(time.Millisecond, func() error {
		n++
		return errors.New("replica 2 at index " + strings.Repeat("9", n%2+1))
	})
	if err == nil || !strings.Contains(err.Error(), "replica 2 at index") || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("got %v, want the condition's last error quoted", err)
	}
}

// TestPollReturnsOnceTheConditionHolds: a condition that comes true ends
// the wait without error, however close to the deadline.
func TestPollReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	if err := Poll(time.Minute, Holds("third call", func() bool { n++; return n == 3 })); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
	err := Poll(0, Holds("leader", func() bool { return false }))
	if err == nil || !strings.Contains(err.Error(), "no leader yet") {
		t.Fatalf("got %v, want \"no leader yet\" quoted", err)
	}
}

func TestPacedEpochs(t *testing.T) {
	for _, tc := range []struct {
		d           time.Duration
		rows, batch int
		delay       time.Duration
		want        int
	}{
		{12 * time.Second, 1500, 64, 25 * time.Millisecond, 20}, // 24 batches: 0.6 s an epoch
		{12*time.Second + 1, 1500, 64, 25 * time.Millisecond, 21},
		{time.Second, 100, 100, time.Second, 1},
	} {
		if got := PacedEpochs(tc.d, tc.rows, tc.batch, tc.delay); got != tc.want {
			t.Errorf("PacedEpochs(%v, %d, %d, %v) = %d, want %d", tc.d, tc.rows, tc.batch, tc.delay, got, tc.want)
		}
	}
}

// TestLoadStretch: a machine no busier than one make test alone leaves
// durations as they are; a busier one stretches them by how much, up to
// the cap; a load average that cannot be read stretches nothing.
func TestLoadStretch(t *testing.T) {
	for _, c := range []struct {
		loadavg string
		cores   int
		want    float64
	}{
		{"0.50 0.40 0.30 1/200 4000", 2, 1},
		{"24.00 10.00 8.00 3/900 5000", 2, 1},
		{"48.00 20.00 9.00 30/900 5000", 2, 2},
		{"72.00 20.00 9.00 30/900 5000", 4, 1.5},
		{"500.0 400.0 300.0 99/900 5000", 2, MaxLoadStretch},
		{"", 2, 1}, {"busy", 2, 1}, {"30.0", 0, 1},
	} {
		if got := loadStretch(c.loadavg, c.cores); got != c.want {
			t.Errorf("load %q on %d cores: stretch %v, want %v", c.loadavg, c.cores, got, c.want)
		}
	}
	t.Setenv(EnvLoadStretch, "off")
	if got := LoadStretch(); got != 1 {
		t.Errorf("%s=off: stretch %v, want 1", EnvLoadStretch, got)
	}
}

// recordingTB records what is logged through it and the cleanups it is
// given, which the test runs itself.
type recordingTB struct {
	testing.TB
	lines    []string
	cleanups []func()
}

func (r *recordingTB) Logf(format string, args ...any) {
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

// TestLogWriterEndsWithTheTest: lines reach the test's log until its
// cleanups run, and are dropped after (a goroutine that outlives the test
// would otherwise panic the test binary by logging to it).
func TestLogWriterEndsWithTheTest(t *testing.T) {
	r := &recordingTB{TB: t}
	w := LogWriter(r)
	fmt.Fprint(w, "during")
	for _, f := range r.cleanups {
		f()
	}
	if n, err := fmt.Fprint(w, "after"); n != len("after") || err != nil {
		t.Fatalf("a write after the test: %d, %v; want it taken whole and dropped", n, err)
	}
	if !slices.Equal(r.lines, []string{"during"}) {
		t.Fatalf("logged %q, want only the line written during the test", r.lines)
	}
}

// TestBudgetChargesWallTimeOverTheLoad: time spent at twice the quiet
// load costs half as much, the stretch is never below 1 (an idle machine
// does not make a budget longer than its timeout), and the description
// shows the wall time once the load made the budget last longer.
func TestBudgetChargesWallTimeOverTheLoad(t *testing.T) {
	b := &Budget{total: time.Minute, left: time.Minute}
	b.charge(40*time.Second, 2)
	if b.left != 40*time.Second {
		t.Fatalf("after 40s at stretch 2: %v left, want 40s", b.left)
	}
	b.charge(30*time.Second, 0.5)
	if b.left != 10*time.Second {
		t.Fatalf("after 30s more at stretch 0.5: %v left, want 10s (stretch counts as 1)", b.left)
	}
	b.last = b.start.Add(70 * time.Second)
	if got, want := b.String(), "1m0s (1m10s on the wall clock: the machine was busy)"; got != want {
		t.Errorf("String: %q, want %q", got, want)
	}
	// Overrun at no load (a poll's last sleep) is not the machine's.
	quiet := &Budget{total: time.Minute, left: time.Minute}
	quiet.charge(65*time.Second, 1)
	quiet.last = quiet.start.Add(65 * time.Second)
	if got := quiet.String(); got != "1m0s" {
		t.Errorf("String after an overrun at no load: %q, want 1m0s", got)
	}
}

// TestTimerFiresAndStops: a timer's channel closes once its budget is
// spent, and Stop, before or after that, returns with its goroutine gone.
func TestTimerFiresAndStops(t *testing.T) {
	t.Setenv(EnvLoadStretch, "off")
	fired := NewTimer(5 * time.Millisecond)
	start := time.Now()
	select {
	case <-fired.C:
	case <-time.After(Scale(time.Minute)):
		t.Fatal("a 5ms timer had not fired after a minute")
	}
	if waited := time.Since(start); waited < 5*time.Millisecond {
		t.Errorf("the timer fired after %v, before its 5ms budget", waited)
	}
	fired.Stop()
	if got := fired.String(); !strings.HasPrefix(got, "5ms") {
		t.Errorf("String: %q, want the 5ms budget first", got)
	}

	stopped := NewTimer(time.Hour)
	stopped.Stop()
	stopped.Stop()
	select {
	case <-stopped.C:
		t.Error("a stopped hour-long timer fired")
	default:
	}
}
