package feed

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/spindle-ml/spindle/internal/auth"
)

// PushTicketPrefix starts the tickets of the ranks' streams of pushed
// input; a split with such a ticket is read with FlightOptions.PushToken.
const PushTicketPrefix = "spindle-push/rank/"

// pushTurnInfix joins a rank's push ticket and the turn it reads, in a
// push endpoint that serves one input per turn (a warm session's jobs).
const pushTurnInfix = "/turn/"

// PushTurnTicket is the ticket of the rank whose planned ticket is
// ticket, reading turn turn's input instead of the job's one input.
func PushTurnTicket(ticket []byte, turn int) []byte {
	return []byte(string(ticket) + pushTurnInfix + strconv.Itoa(turn))
}

// ParsePushTicket returns the rank a push ticket names and the turn it
// reads (0 when it names none).
func ParsePushTicket(ticket []byte) (rank, turn int, err error) {
	rest, ok := strings.CutPrefix(string(ticket), PushTicketPrefix)
	if !ok {
		return 0, 0, fmt.Errorf("ticket %q is no push ticket", ticket)
	}
	r, t, hasTurn := strings.Cut(rest, pushTurnInfix)
	if rank, err = strconv.Atoi(r); err != nil || rank < 0 {
		return 0, 0, fmt.Errorf("ticket %q names no rank", ticket)
	}
	if hasTurn {
		if turn, err = strconv.Atoi(t); err != nil || turn < 1 {
			return 0, 0, fmt.Errorf("ticket %q names no turn (1, 2, ...)", ticket)
		}
	}
	return rank, turn, nil
}

// PushFeedToken is the token a rank's executor reads its share of job
// jobID's pushed input with, derived from the job's secret.
func PushFeedToken(secret, jobID string) string {
	return auth.DeriveToken(secret, "flight-put/feed/"+jobID)
}

// IsFlightPutURI reports whether an input asks for pushed input: a Flight
// endpoint on the driver that producers DoPut into (flight-put: or
// flight-put://host:port).
func IsFlightPutURI(s string) bool { return strings.HasPrefix(s, "flight-put:") }

// ParseFlightPutURI returns the address a flight-put input listens on:
// "" for flight-put: (the driver's own host, any free port), else the
// host:port of flight-put://host:port (either part may be empty: an empty
// host is the driver's, port 0 any free one).
func ParseFlightPutURI(s string) (string, error) {
	rest, ok := strings.CutPrefix(s, "flight-put:")
	if !ok {
		//lint:ignore ST1005 the message ends with the scheme it names
		return "", fmt.Errorf("%w: input %s is not flight-put:", ErrInput, s)
	}
	if rest == "" || rest == "//" {
		return "", nil
	}
	hostport, ok := strings.CutPrefix(rest, "//")
	if !ok || strings.ContainsAny(hostport, "/?#") {
		return "", fmt.Errorf("%w: input %s: want flight-put: or flight-put://host:port", ErrInput, s)
	}
	if !strings.Contains(hostport, ":") {
		hostport += ":0"
	}
	_, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", fmt.Errorf("%w: input %s: want flight-put://host:port: %v", ErrInput, s, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return "", fmt.Errorf("%w: input %s: port %q is not 0 to 65535", ErrInput, s, port)
	}
	return hostport, nil
}
