// Package e2e tests the standalone cluster manager end to end with real
// processes: spindle master and spindle worker daemons on loopback, jobs
// run with spindle submit --master spindle://..., and masters and workers
// killed with SIGKILL. The tests build the spindle binary once.
package e2e
