//go:build !race

package testutil

// RaceDetector is set when the tests run under the race detector.
const RaceDetector = false
