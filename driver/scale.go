package driver

// What the roster does once per registration must not grow with the gang:
// a gang of n registering one by one would cost O(n²) (a 10,000-executor
// gang took 26 s of the driver's CPU to register; BenchmarkRegisterGang).

// allRegisteredLocked reports whether every member in rank order has
// registered. register calls it once the count of first registrations
// says the gang is complete, to confirm it. g.mu is held.
func (g *roster) allRegisteredLocked() bool {
	for _, id := range g.order {
		if !g.members[id].registered {
			return false
		}
	}
	return true
}

// hostRanksLocked returns each host's ranks in rank order (the members in
// g.order that registered from it), building the index once for all the
// registrations it serves. g.mu is held.
func (g *roster) hostRanksLocked() map[string][]int {
	if g.onHost != nil {
		return g.onHost
	}
	g.onHost = map[string][]int{}
	for _, id := range g.order {
		o := g.members[id]
		g.onHost[o.host] = append(g.onHost[o.host], o.rank)
	}
	return g.onHost
}
