package am

import (
	"sync"

	"github.com/spindle-ml/spindle/driver"
)

// eventQueue hands the allocator's executor events to the driver in order
// without blocking the allocator: the driver reads Events only between
// its calls to the allocator, and a gang's start events alone (one per
// container, sent before Request returns) outnumber any fixed buffer once
// a job has thousands of executors.
type eventQueue struct {
	out  chan driver.Event // what Events returns
	more chan struct{}     // a token when list has events
	mu   sync.Mutex
	list []driver.Event
}

func newEventQueue() *eventQueue {
	return &eventQueue{out: make(chan driver.Event, 1024), more: make(chan struct{}, 1)}
}

// push queues ev for the driver.
func (q *eventQueue) push(ev driver.Event) {
	q.mu.Lock()
	q.list = append(q.list, ev)
	q.mu.Unlock()
	select {
	case q.more <- struct{}{}:
	default:
	}
}

// pump delivers queued events, in the order pushed, until stop is closed.
func (q *eventQueue) pump(stop <-chan struct{}) {
	for {
		q.mu.Lock()
		batch := q.list
		q.list = nil
		q.mu.Unlock()
		for _, ev := range batch {
			select {
			case q.out <- ev:
			case <-stop:
				return
			}
		}
		select {
		case <-q.more:
		case <-stop:
			return
		}
	}
}
