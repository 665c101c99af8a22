package standalonepb

import "strings"

// Outcome names how an application stands, as YARN and Spark report it:
// RUNNING, WAITING (for room to place it), or once ended SUCCEEDED,
// FAILED or KILLED (FINISHED for a driver that did not say).
func (a *AppInfo) Outcome() string {
	if a.GetState() == AppState_APP_STATE_RUNNING {
		if a.GetWaiting() {
			return "WAITING"
		}
		return "RUNNING"
	}
	if f := a.GetFinalStatus(); f != FinalStatus_FINAL_STATUS_UNDEFINED {
		return strings.TrimPrefix(f.String(), "FINAL_STATUS_")
	}
	return strings.TrimPrefix(a.GetState().String(), "APP_STATE_")
}

// DescribeEnd says how an application stands and, unless it is running
// or succeeded, why: "FAILED (rank 1 exited with status 3)".
func DescribeEnd(a *AppInfo) string {
	s := a.Outcome()
	if s != "SUCCEEDED" && s != "RUNNING" && a.GetMessage() != "" {
		s += " (" + a.GetMessage() + ")"
	}
	return s
}
