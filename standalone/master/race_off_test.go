//go:build !race

package master

// raceDetector is set when the tests run under the race detector.
const raceDetector = false
