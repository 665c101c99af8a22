package master

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/spindle-ml/spindle/standalone/internal/apierr"
)

// Placement policies.
const (
	// PlacementSpread puts each executor on the worker running the fewest
	// executors of the application, then the one with the most free cores.
	PlacementSpread = "spread"
	// PlacementPack fills the fullest worker that still fits first.
	PlacementPack = "pack"
)

// ask is one executor a gang needs.
type ask struct {
	ID        string
	Role      string // the executor's role in its job; "" for worker
	Cores     int
	MemoryMB  int64
	GPUs      int
	Preferred []string
	// Excluded are hosts or worker ids the executor must not be placed on.
	Excluded []string
}

// free is what a worker has left.
type free struct {
	w        *Worker
	cores    int
	memoryMB int64
	gpus     []int // free device indices, ascending
	appExecs int   // executors of the placing application
}

func (f *free) fits(a ask) bool {
	return f.cores >= a.Cores && f.memoryMB >= a.MemoryMB && len(f.gpus) >= a.GPUs
}

// room is how many executors shaped like a fit on f.
func (f *free) room(a ask) int {
	n := f.cores / max(a.Cores, 1)
	if a.MemoryMB > 0 {
		n = min(n, int(f.memoryMB/a.MemoryMB))
	}
	if a.GPUs > 0 {
		n = min(n, len(f.gpus)/a.GPUs)
	}
	return n
}

// freeByWorker returns the free resources of every alive worker, ordered by id.
func freeByWorker(s *State, app string) []*free {
	use := s.usageByWorker()
	appExecs := map[string]int{}
	for _, e := range s.Executors {
		if e.App == app && e.Active() {
			appExecs[e.Worker]++
		}
	}
	var out []*free
	for _, w := range s.sortedWorkers() {
		if !w.Alive {
			continue
		}
		u := use[w.ID]
		f := &free{w: w, cores: w.Cores - u.cores, memoryMB: w.MemoryMB - u.memoryMB, appExecs: appExecs[w.ID]}
		for g := 0; g < w.GPUs; g++ {
			if !u.gpus[g] {
				f.gpus = append(f.gpus, g)
			}
		}
		out = append(out, f)
	}
	return out
}

// place chooses a worker (and GPUs) for every ask, all or none. It only
// reads s; the caller commits the result through Raft. The plan lists the
// executors in ask order.
//
// A gang may mix shapes (a job's workers, chief and parameter servers
// each have their own): the largest asks are placed first, so a big
// executor is not shut out by small ones scattered over every worker
// when an order exists in which all fit (first fit decreasing).
func place(s *State, app string, asks []ask, policy string) ([]*Executor, error) {
	frees := freeByWorker(s, app)
	out := make([]*Executor, len(asks))
	for _, i := range largestFirst(asks) {
		a := asks[i]
		var cands []*free
		for _, f := range frees {
			if f.fits(a) && !slices.Contains(a.Excluded, f.w.Host) && !slices.Contains(a.Excluded, f.w.ID) {
				cands = append(cands, f)
			}
		}
		if len(cands) == 0 {
			msg := explainNoRoom(s, app, asks)
			if len(a.Excluded) > 0 {
				msg += fmt.Sprintf("; the job keeps off %s after repeated failures there", strings.Join(a.Excluded, ", "))
			}
			return nil, fmt.Errorf("%w: %s", apierr.ErrNoRoom, msg)
		}
		if len(a.Preferred) > 0 {
			var local []*free
			for _, f := range cands {
				for _, h := range a.Preferred {
					if f.w.Host == h || f.w.ID == h {
						local = append(local, f)
						break
					}
				}
			}
			if len(local) > 0 {
				cands = local
			}
		}
		best := cands[0]
		for _, f := range cands[1:] {
			if better(f, best, policy) {
				best = f
			}
		}
		e := &Executor{App: app, ID: a.ID, Role: a.Role, Worker: best.w.ID, Cores: a.Cores, MemoryMB: a.MemoryMB}
		e.GPUs = append(e.GPUs, best.gpus[:a.GPUs]...)
		best.gpus = best.gpus[a.GPUs:]
		best.cores -= a.Cores
		best.memoryMB -= a.MemoryMB
		best.appExecs++
		out[i] = e
	}
	return out, nil
}

// largestFirst returns the indices of asks, the scarcest resources
// first (GPUs, then memory, then cores); equal asks keep their order, so
// a uniform gang is placed in order.
func largestFirst(asks []ask) []int {
	idx := make([]int, len(asks))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(x, y int) bool {
		a, b := asks[idx[x]], asks[idx[y]]
		if a.GPUs != b.GPUs {
			return a.GPUs > b.GPUs
		}
		if a.MemoryMB != b.MemoryMB {
			return a.MemoryMB > b.MemoryMB
		}
		return a.Cores > b.Cores
	})
	return idx
}

// better says whether worker f beats g for the next executor.
func better(f, g *free, policy string) bool {
	if policy == PlacementPack {
		if f.cores != g.cores {
			return f.cores < g.cores
		}
		if f.memoryMB != g.memoryMB {
			return f.memoryMB < g.memoryMB
		}
		return f.w.ID < g.w.ID
	}
	if f.appExecs != g.appExecs {
		return f.appExecs < g.appExecs
	}
	if f.cores != g.cores {
		return f.cores > g.cores
	}
	if f.memoryMB != g.memoryMB {
		return f.memoryMB > g.memoryMB
	}
	return f.w.ID < g.w.ID
}

// fitsEmpty says whether the gang would fit on the alive workers if
// nothing else ran: a gang that cannot must not hold up the queue.
func fitsEmpty(s *State, asks []ask) bool {
	empty := newState()
	for id, w := range s.Workers {
		empty.Workers[id] = w
	}
	_, err := place(empty, "", asks, PlacementPack)
	return err == nil
}

// explainNoRoom says what a gang needs and what the cluster has, as in
// "need 4 executors of 2 cores/2048 MiB, cluster has room for 3: w1 full,
// w2 1 free core".
func explainNoRoom(s *State, app string, asks []ask) string {
	if len(asks) == 0 {
		return "empty request"
	}
	if groups := shapeGroups(asks); len(groups) > 1 {
		return explainMixed(s, app, groups)
	}
	shape := asks[0]
	var b strings.Builder
	fmt.Fprintf(&b, "need %d executor%s of %s", len(asks), plural(len(asks)), shapeString(shape))
	workers := s.sortedWorkers()
	if len(workers) == 0 {
		b.WriteString(", no workers are registered")
		return b.String()
	}
	frees := map[string]*free{}
	for _, f := range freeByWorker(s, app) {
		frees[f.w.ID] = f
	}
	total := 0
	var parts []string
	for _, w := range workers {
		f, ok := frees[w.ID]
		if !ok {
			parts = append(parts, w.ID+" lost")
			continue
		}
		n := f.room(shape)
		total += n
		switch {
		case n > 0:
			parts = append(parts, fmt.Sprintf("%s room for %d", w.ID, n))
		default:
			parts = append(parts, w.ID+" "+shortfall(f, shape))
		}
	}
	fmt.Fprintf(&b, ", cluster has room for %d: %s", total, strings.Join(parts, ", "))
	return b.String()
}

// shapeGroup is the asks of a gang that share a role and a shape.
type shapeGroup struct {
	shape ask
	n     int
}

// label names the group's role and shape, as in "ps of 4 cores/8192 MiB".
func (g shapeGroup) label() string {
	return roleName(g.shape.Role) + " of " + shapeString(g.shape)
}

// shapeGroups groups asks by role and shape, in the order they first appear.
func shapeGroups(asks []ask) []shapeGroup {
	var out []shapeGroup
	for _, a := range asks {
		found := false
		for i := range out {
			s := out[i].shape
			if s.Role == a.Role && s.Cores == a.Cores && s.MemoryMB == a.MemoryMB && s.GPUs == a.GPUs {
				out[i].n++
				found = true
				break
			}
		}
		if !found {
			out = append(out, shapeGroup{shape: ask{Role: a.Role, Cores: a.Cores, MemoryMB: a.MemoryMB, GPUs: a.GPUs}, n: 1})
		}
	}
	return out
}

// explainMixed explains a gang of several roles or shapes: what each
// group needs, then how many of each every worker could take on its own,
// as in "need 2 worker of 1 core/1024 MiB and 1 ps of 8 cores/2048 MiB,
// cluster has room for 5 worker and 0 ps: w1 room for 3 worker and 0 ps
// (4 free cores), w2 lost".
func explainMixed(s *State, app string, groups []shapeGroup) string {
	var b strings.Builder
	needs := make([]string, len(groups))
	for i, g := range groups {
		needs[i] = fmt.Sprintf("%d %s", g.n, g.label())
	}
	fmt.Fprintf(&b, "need %s", strings.Join(needs, " and "))
	workers := s.sortedWorkers()
	if len(workers) == 0 {
		b.WriteString(", no workers are registered")
		return b.String()
	}
	frees := map[string]*free{}
	for _, f := range freeByWorker(s, app) {
		frees[f.w.ID] = f
	}
	totals := make([]int, len(groups))
	var parts []string
	for _, w := range workers {
		f, ok := frees[w.ID]
		if !ok {
			parts = append(parts, w.ID+" lost")
			continue
		}
		rooms := make([]string, len(groups))
		for i, g := range groups {
			n := f.room(g.shape)
			totals[i] += n
			rooms[i] = fmt.Sprintf("%d %s", n, roleName(g.shape.Role))
		}
		free := fmt.Sprintf("%d free core%s/%d MiB", max(f.cores, 0), plural(max(f.cores, 0)), max(f.memoryMB, 0))
		if f.w.GPUs > 0 {
			free += fmt.Sprintf("/%d GPU%s", len(f.gpus), plural(len(f.gpus)))
		}
		parts = append(parts, fmt.Sprintf("%s room for %s (%s)", w.ID, strings.Join(rooms, " and "), free))
	}
	have := make([]string, len(groups))
	for i, g := range groups {
		have[i] = fmt.Sprintf("%d %s", totals[i], roleName(g.shape.Role))
	}
	fmt.Fprintf(&b, ", cluster has room for %s: %s", strings.Join(have, " and "), strings.Join(parts, ", "))
	return b.String()
}

// roleName is role, or worker when empty.
func roleName(role string) string {
	if role == "" {
		return "worker"
	}
	return role
}

// validRole says whether role is a plausible role name: empty (worker) or
// up to 32 lower-case letters.
func validRole(role string) bool {
	if len(role) > 32 {
		return false
	}
	for _, r := range role {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return true
}

// shortfall names what keeps an executor of shape off a worker.
func shortfall(f *free, shape ask) string {
	if f.cores <= 0 && f.memoryMB <= 0 && len(f.gpus) == 0 {
		return "full"
	}
	var why []string
	if f.cores < shape.Cores {
		if f.cores <= 0 {
			why = append(why, "no free cores")
		} else {
			why = append(why, fmt.Sprintf("%d free core%s", f.cores, plural(f.cores)))
		}
	}
	if f.memoryMB < shape.MemoryMB {
		why = append(why, fmt.Sprintf("%d MiB free", max(f.memoryMB, 0)))
	}
	if len(f.gpus) < shape.GPUs {
		why = append(why, fmt.Sprintf("%d free GPU%s", len(f.gpus), plural(len(f.gpus))))
	}
	if len(why) == 0 {
		return "full"
	}
	return strings.Join(why, " and ")
}

func shapeString(a ask) string {
	s := fmt.Sprintf("%d core%s/%d MiB", a.Cores, plural(a.Cores), a.MemoryMB)
	if a.GPUs > 0 {
		s += fmt.Sprintf("/%d GPU%s", a.GPUs, plural(a.GPUs))
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// checkCaps refuses a gang that would take an application past the
// per-application limits (0 means no limit).
func checkCaps(s *State, app string, asks []ask, maxExecutors, maxCores int) error {
	execs, cores := len(asks), 0
	for _, a := range asks {
		cores += a.Cores
	}
	for _, e := range s.Executors {
		if e.App == app && e.Active() {
			execs++
			cores += e.Cores
		}
	}
	if maxExecutors > 0 && execs > maxExecutors {
		return fmt.Errorf("%w: application %s would have %d executors; the cluster allows %d per application (spindle.standalone.maxExecutorsPerApp)",
			apierr.ErrOverCap, app, execs, maxExecutors)
	}
	if maxCores > 0 && cores > maxCores {
		return fmt.Errorf("%w: application %s would hold %d cores; the cluster allows %d per application (spindle.standalone.maxCoresPerApp)",
			apierr.ErrOverCap, app, cores, maxCores)
	}
	return nil
}
