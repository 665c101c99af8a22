//go:build !race

package collective

// raceDetector is set when the tests run under the race detector.
const raceDetector = false
