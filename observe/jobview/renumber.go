package jobview

import (
	"fmt"
	"strings"
)

// RankMove is one rank's new number after an elastic job went on without
// a lost rank in place (spindle.failure.shrinkInPlace): the survivors keep
// their order and close the gap.
type RankMove struct {
	From int `json:"from"`
	To   int `json:"to"`
}

// Renumbering returns how the ranks of a world of size world move when it
// goes on without rank left: those below it keep their numbers, those
// above it move down by one.
func Renumbering(left, world int) []RankMove {
	moves := make([]RankMove, 0, max(world-1, 0))
	for r := 0; r < world; r++ {
		switch {
		case r < left:
			moves = append(moves, RankMove{From: r, To: r})
		case r > left:
			moves = append(moves, RankMove{From: r, To: r - 1})
		}
	}
	return moves
}

// RenumberMessage says in words what a KindRenumber event records:
// "rank 1 left; rank 2 is now rank 1, rank 3 is now rank 2".
func RenumberMessage(left int, moves []RankMove) string {
	var moved []string
	for _, m := range moves {
		if m.From != m.To {
			moved = append(moved, fmt.Sprintf("rank %d is now rank %d", m.From, m.To))
		}
	}
	if len(moved) == 0 {
		return fmt.Sprintf("rank %d left; no other rank moved", left)
	}
	return fmt.Sprintf("rank %d left; %s", left, strings.Join(moved, ", "))
}

// Change is one entry of a job's timeline: a moment its gang changed (a
// restart, a rank replaced alone, the ranks renumbered).
type Change struct {
	T       float64 `json:"t"` // seconds since the job started
	Kind    Kind    `json:"kind"`
	Rank    int     `json:"rank"`
	Message string  `json:"message"`
}

// ChangesKept bounds a job's timeline: the newest changes are kept.
const ChangesKept = 200

// addChange appends to the job's timeline; j.mu is held.
func (j *Job) addChange(ev Event, msg string) {
	if len(j.changes) >= ChangesKept {
		j.changes = j.changes[1:]
	}
	j.changes = append(j.changes, Change{T: j.since(ev.Time), Kind: ev.Kind, Rank: ev.Rank, Message: msg})
}

// renumber applies a KindRenumber event: the row of the rank that left
// moves to the job's left ranks, and every other row to its new number,
// noting the one it had, so that each row shows the process that now
// holds its rank; j.mu is held.
func (j *Job) renumber(ev Event) {
	if r := j.ranks[ev.Rank]; r != nil {
		r.view.State = RankLeft
		j.left = append(j.left, r.view)
		delete(j.ranks, ev.Rank)
	}
	moved := make(map[int]*rankState, len(j.ranks))
	for _, m := range ev.Renumbered {
		r := j.ranks[m.From]
		if r == nil {
			continue
		}
		delete(j.ranks, m.From)
		if m.From != m.To {
			r.view.FormerRanks = append(r.view.FormerRanks, m.From)
		}
		if r.view.RoleRank == m.From { // a job of workers only, whose role ranks are its ranks
			r.view.RoleRank = m.To
		}
		r.view.Rank = m.To
		moved[m.To] = r
	}
	// Ranks the event does not name keep their numbers unless a moved
	// rank took it.
	for n, r := range j.ranks {
		if _, taken := moved[n]; !taken {
			moved[n] = r
		}
	}
	j.ranks = moved
	msg := ev.Message
	if msg == "" {
		msg = RenumberMessage(ev.Rank, ev.Renumbered)
	}
	j.addChange(ev, msg)
}
