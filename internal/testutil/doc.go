// Package testutil holds the timing helpers every Spindle test shares.
//
// A test that passes on an idle machine and fails on a busy one has a
// defect: users, packagers and CI run the tests beside other work. Two
// rules keep tests honest about time:
//
//   - Every duration a test chooses (a wait's deadline, a token's
//     lifetime, a heartbeat or connect timeout it configures) goes through
//     Scale, so a slow machine can stretch them all at once by setting
//     SPINDLE_TEST_TIMESCALE (a positive number; 1 when unset), as
//     Nomad's testutil.TestMultiplier does. A machine busier than one
//     make test alone stretches them by itself (LoadStretch); a wait's
//     deadline is a Budget (or a Timer, in a select), which keeps
//     stretching while the load rises during the wait.
//   - A test never sleeps to synchronise: it waits for a condition with
//     WaitFor, which polls until the condition holds and, at the deadline,
//     fails the test quoting the condition's last error.
package testutil
