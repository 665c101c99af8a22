// Package push is the endpoint of a flight-put: input: an Arrow Flight
// service on the driver that producers DoPut batches into while the job
// runs. It checks each producer's token before a message is read and
// each batch before it is dealt, deals the rows to ranks in rounds of one
// batch per rank with a bounded buffer that slows producers down, and
// serves each rank its share as one Flight stream (DoGet) that the rank's
// feed pipeline reads like any other Flight split.
//
// What a rank's reader shares with this endpoint (the ticket prefix, the
// feed token, the flight-put: syntax) is in package feed, which this
// package builds on; feed does not import it.
package push
