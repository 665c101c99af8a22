// Package testbin gives end-to-end tests the programs they run as
// processes (spindle, the examples, the e2e checkers), and the arguments
// of the short runs several packages share (SparseLRRows).
//
// Each test package used to build its own copies, so one run of the
// end-to-end and real-Hadoop tiers linked the 76 MB spindle binary once
// per package. make builds them once into a directory it names in
// SPINDLE_TEST_BIN_DIR; Build then hard-links them into the package's own
// directory, so each package's processes still have a path of their own
// (some tests find their processes by it). Without the variable, as under
// a plain `go test`, Build builds them.
package testbin
