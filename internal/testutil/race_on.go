//go:build race

package testutil

// RaceDetector is set when the tests run under the race detector, which
// slows code with many goroutines several times over: a sweep whose
// large cases check arithmetic or recovery rather than concurrency takes
// a sample of them under it (make test runs every case without it, the
// Makefile's RACE_SAMPLED_TESTS), and a test whose claim is about
// timing skips.
const RaceDetector = true
