// Package timeline records spans of a training process's time (waiting
// for its feed, collective operations, checkpoint saves) for the job's
// Chrome-trace timeline (spindle.timeline).
//
// A process records only when its executor asks (SPINDLE_TIMELINE=1). Spans
// are batched and sent as datagrams to the executor's report socket
// (SPINDLE_REPORT_SOCKET), which passes them to the driver with its
// heartbeats; the driver writes the trace file. Recording never blocks the
// process: spans the executor's queue has no room for wait for a later
// send (up to a bound past which the oldest are dropped), and only Flush,
// called as a program ends, waits a moment for room.
//
// A datagram is one JSON object: {"spans": [{"name": "allreduce", "cat":
// "collective", "ts": MICROS, "dur": MICROS}, ...]}, ts counted from the
// Unix epoch. The Python package sends the same.
package timeline
