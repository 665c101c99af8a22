// Package webui serves the pages that show jobs: the driver's live job UI
// and the history server's list of finished and running jobs. Both serve
// the same embedded single-page app (no CDN, nothing fetched from outside)
// over a small read-only JSON API; they differ only in their Source: one
// live job, or the jobs found in an event log directory.
//
// Nothing here can start or stop anything: every route is a GET of a
// snapshot, a log or a static file.
package webui
