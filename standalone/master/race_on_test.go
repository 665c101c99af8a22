//go:build race

package master

// raceDetector is set when the tests run under the race detector, which
// slows the masters several times over: timing-sensitive tests skip.
const raceDetector = true
