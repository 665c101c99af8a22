package jobview

// RanksPageSize is how many ranks a page of a job's ranks table shows: a
// job of a thousand ranks is read a page at a time, with every rank
// counted by state above it.
const RanksPageSize = 100

// PageRanks keeps limit of the snapshot's ranks from offset on (limit <= 0
// keeps them all), and records how many there were in all and in each
// state, so a page of a large job still says how the whole job stands.
func (s *Snapshot) PageRanks(offset, limit int) {
	s.RankCount = len(s.Ranks)
	s.RankStates = map[string]int{}
	for _, r := range s.Ranks {
		s.RankStates[r.State]++
	}
	if limit <= 0 {
		return
	}
	offset = min(max(offset, 0), len(s.Ranks))
	end := min(offset+limit, len(s.Ranks))
	s.Ranks, s.RankOffset = s.Ranks[offset:end:end], offset
}
