package tokenkeeper

import "strings"

// The log messages of a keeper's events: what an operator looks for in a
// job's log to see its tokens kept alive.
const (
	MsgRenewed   = "hdfs delegation token renewed"
	MsgFresh     = "logged in again and obtained fresh hdfs delegation tokens for the executors"
	MsgCancelled = "hdfs delegation token cancelled"
)

// Events counts a keeper's events in a log.
type Events struct {
	Renewed, Fresh, Cancelled int
}

// CountEvents counts the keeper's events in log, a job's log text.
func CountEvents(log string) Events {
	return Events{
		Renewed:   strings.Count(log, MsgRenewed),
		Fresh:     strings.Count(log, MsgFresh),
		Cancelled: strings.Count(log, MsgCancelled),
	}
}
