package driver

import (
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// credentialsFor returns the credentials an executor that uses generation
// should get: nil when it has the newest.
func credentialsFor(k CredentialKeeper, generation int64) *driverpb.Credentials {
	if k == nil {
		return nil
	}
	c := k.ExecutorCredentials()
	if c == nil || c.GetGeneration() <= generation {
		return nil
	}
	return c
}

// credScanEvery bounds how often a heartbeat that changes nothing looks
// at every member for the oldest credentials generation (an executor that
// exited may have held it back): a scan per heartbeat would cost a gang of
// n executors n² a heartbeat interval.
const credScanEvery = time.Second

// useCredentials records the credentials generation executor id uses and
// returns the oldest generation any registered, running executor uses;
// ok is false when there is none, or when nothing changed since the last
// look, less than credScanEvery ago.
func (g *roster) useCredentials(id string, generation int64) (oldest int64, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	changed := false
	if m, found := g.members[id]; found && m.credGen != generation {
		m.credGen, changed = generation, true
	}
	now := g.now()
	if !changed && now.Sub(g.credScan) < credScanEvery {
		return 0, false
	}
	g.credScan = now
	for _, m := range g.members {
		if !m.registered || m.exited {
			continue
		}
		if !ok || m.credGen < oldest {
			oldest, ok = m.credGen, true
		}
	}
	return oldest, ok
}
