package master

import (
	"fmt"
	"strings"
)

// neverFits says why a gang could not be placed even on an empty cluster
// of the workers registered now: an executor larger than every alive
// worker, or a gang larger than all of them together. Empty when it could
// fit (or when no worker is alive yet: one may still join).
func neverFits(s *State, asks []ask) string {
	var alive []*Worker
	var cores, gpus int
	var mem int64
	for _, w := range s.sortedWorkers() {
		if w.Alive {
			alive = append(alive, w)
			cores, mem, gpus = cores+w.Cores, mem+w.MemoryMB, gpus+w.GPUs
		}
	}
	if len(alive) == 0 {
		return ""
	}
	largest := alive[0]
	for _, w := range alive[1:] {
		if w.MemoryMB > largest.MemoryMB || (w.MemoryMB == largest.MemoryMB && w.Cores > largest.Cores) {
			largest = w
		}
	}
	for _, g := range shapeGroups(asks) {
		fits := false
		for _, w := range alive {
			if w.Cores >= g.shape.Cores && w.MemoryMB >= g.shape.MemoryMB && w.GPUs >= g.shape.GPUs {
				fits = true
				break
			}
		}
		if !fits {
			role := g.shape.Role
			if role == "" {
				role = "worker"
			}
			return fmt.Sprintf("no worker could ever hold a %s executor of %s: the largest, %s, has %s",
				role, shapeString(g.shape), largest.ID, shapeString(ask{Cores: largest.Cores, MemoryMB: largest.MemoryMB, GPUs: largest.GPUs}))
		}
	}
	var needCores, needGPUs int
	var needMem int64
	for _, a := range asks {
		needCores, needMem, needGPUs = needCores+a.Cores, needMem+a.MemoryMB, needGPUs+a.GPUs
	}
	if needCores > cores || needMem > mem || needGPUs > gpus {
		return fmt.Sprintf("the gang needs %s in all and the %d workers have %s together",
			shapeString(ask{Cores: needCores, MemoryMB: needMem, GPUs: needGPUs}), len(alive), shapeString(ask{Cores: cores, MemoryMB: mem, GPUs: gpus}))
	}
	return ""
}

// needOf says what a gang asks for: "2 x 4 cores/16384 MiB, 1 x 8 cores/...".
func needOf(asks []ask) string {
	var parts []string
	for _, g := range shapeGroups(asks) {
		parts = append(parts, fmt.Sprintf("%d x %s", g.n, shapeString(g.shape)))
	}
	return strings.Join(parts, ", ")
}

// waiting lists the applications whose requests wait in the queue, with
// what they need.
func (s *scheduler) waiting() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for _, g := range s.queue {
		if g.state == requestPending {
			out[g.app] = needOf(g.asks)
		}
	}
	return out
}
