package testutil

import (
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Durations in tests were chosen on a two-core machine running one
// `make test`, whose one-minute load average, sampled every 10 s, was
// 10-30 (42 at most, while it compiled): under QuietLoadPerCore per core
// for most of the run. A second make test beside took it to 50-70. A
// machine busier than one make test (a second beside, a shared CI
// runner) stretches every scaled duration by how much busier it is, up
// to MaxLoadStretch, so the tests' deadlines, token lifetimes and
// timeouts hold there too without SPINDLE_TEST_TIMESCALE set by hand.
const (
	QuietLoadPerCore = 12.0
	MaxLoadStretch   = 4.0
)

// EnvLoadStretch, set to "off", turns the load stretch off: a run that
// wants SPINDLE_TEST_TIMESCALE alone to decide (a timing experiment).
const EnvLoadStretch = "SPINDLE_TEST_LOAD_STRETCH"

// LoadStretch is how much longer a scaled duration is because the
// machine is busy: the one-minute load average per core over
// QuietLoadPerCore, between 1 and MaxLoadStretch; 1 where the load
// average cannot be read or EnvLoadStretch is "off".
func LoadStretch() float64 {
	if os.Getenv(EnvLoadStretch) == "off" {
		return 1
	}
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 1
	}
	return loadStretch(string(b), runtime.NumCPU())
}

// loadStretch computes LoadStretch from /proc/loadavg's text and the
// cores this process may use.
func loadStretch(loadavg string, cores int) float64 {
	fields := strings.Fields(loadavg)
	if len(fields) == 0 || cores < 1 {
		return 1
	}
	load, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return 1
	}
	return min(max(load/float64(cores)/QuietLoadPerCore, 1), MaxLoadStretch)
}
