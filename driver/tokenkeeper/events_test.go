package tokenkeeper

import "testing"

func TestCountEvents(t *testing.T) {
	log := "level=INFO msg=\"" + MsgRenewed + "\" token=1\n" +
		"level=INFO msg=\"" + MsgRenewed + "\" token=2\n" +
		"level=INFO msg=\"" + MsgFresh + "\" generation=1\n" +
		"level=INFO msg=\"" + MsgCancelled + "\" token=1\n" +
		"level=INFO msg=\"hdfs delegation token obtained for the executors\"\n"
	if got, want := CountEvents(log), (Events{Renewed: 2, Fresh: 1, Cancelled: 1}); got != want {
		t.Fatalf("CountEvents = %+v, want %+v", got, want)
	}
}
