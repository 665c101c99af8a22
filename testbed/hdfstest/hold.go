package hdfstest

import "sync"

// readHold keeps datanodes from answering block reads while it is on.
type readHold struct {
	mu sync.Mutex
	// released is closed when the hold ends; nil when there is none.
	released chan struct{}
}

// wait blocks while a hold is on.
func (h *readHold) wait() {
	h.mu.Lock()
	ch := h.released
	h.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// end ends the hold, if one is on: datanodes stopping do not wait for a
// test that forgot to release it.
func (h *readHold) end() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released != nil {
		close(h.released)
		h.released = nil
	}
}

// HoldReads makes every datanode hold the block reads it is asked for,
// without answering, until release is called: a slow file system on
// demand, for tests of what a reader does meanwhile. Writes go on.
func (c *Cluster) HoldReads() (release func()) {
	h := c.hold
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released == nil {
		h.released = make(chan struct{})
	}
	ch := h.released
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.released == ch {
			close(ch)
			h.released = nil
		}
	}
}
