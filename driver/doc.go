// Package driver runs a Spindle job from the submitting side: it plans
// splits, gets executors from a ClusterManager, serves the authenticated
// control plane they register with, publishes the cluster spec once the
// whole gang is present, and then only watches heartbeats, progress and
// exits. It applies the failure policy (spindle.failure.policy: stop at
// the first failure, restart from the newest complete checkpoint, or go on
// elastically with the survivors) and decides the job's outcome.
//
// A job's executors have roles (roles.go): an optional chief, the
// workers, which alone are fed, and parameter servers. They are requested
// together, all or nothing; the chief's end, or without a chief every
// worker's, ends the job, and whatever still runs then is stopped as the
// job's normal end.
//
// The driver is never in the data path: executors read their splits
// themselves, and training processes talk to each other directly.
package driver
