//go:build race

package collective

// raceDetector is set when the tests run under the race detector, which
// slows the in-memory link's many goroutines ten times over: sweeps that
// check arithmetic rather than concurrency take a sample of their cases.
const raceDetector = true
