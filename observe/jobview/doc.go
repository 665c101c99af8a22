// Package jobview is the one model of a job that every way of seeing it
// shares: the driver's live web UI, the history server, and the event log
// they are both built from.
//
// A job is described by a stream of Events (submitted, state changes,
// executor changes, progress, reported scalars, log lines). A Job applies
// them in order; the driver applies them as they happen and writes them to
// the event log, and the history server replays the log through the same
// code, so a finished job's page shows what the live page showed.
package jobview
