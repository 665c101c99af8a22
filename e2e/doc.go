// Package e2e holds Spindle's end-to-end tests: they build the real
// spindle binary and a small training program (feedcheck), generate data,
// and run `spindle submit` as a user would, with real executor and
// training processes, checking exit statuses, output and what was fed.
package e2e
