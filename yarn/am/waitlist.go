package am

// waitList holds the executors of one priority of a gang that have no
// container yet, in the order they started waiting, indexed by the
// places (NodeManager hosts and racks) that hold their input. A granted
// container finds its executor by looking at the front of its host's
// queue, then its rack's, then the whole list's, so placing a gang of n
// containers costs O(n) overall rather than a scan of every waiting
// executor per container, which at thousands of containers was O(n²).
//
// Queues are consumed lazily: an executor that got a container leaves its
// entries behind in the other queues, where they are recognised as stale
// (their ticket is no longer the executor's) and dropped when reached.
type waitList struct {
	next   uint64         // the ticket the next executor to wait gets
	ticket map[int]uint64 // spec index -> the ticket it waits under
	all    ticketQueue
	near   map[string]*ticketQueue // hostKey or rackKey -> queue
	visits int                     // entries looked at by take: the work placing costs
}

// ticketQueue is a FIFO of waiting executors' entries.
type ticketQueue struct {
	entries []ticketEntry
	head    int
}

type ticketEntry struct {
	spec   int
	ticket uint64
}

// hostKey and rackKey name the queues of a host and of a rack apart.
func hostKey(host string) string { return "host:" + host }
func rackKey(rack string) string { return "rack:" + rack }

// push makes spec i wait, behind every executor already waiting, in the
// queues of the places named by keys.
func (w *waitList) push(i int, keys []string) {
	if w.ticket == nil {
		w.ticket, w.near = map[int]uint64{}, map[string]*ticketQueue{}
	}
	w.next++
	w.ticket[i] = w.next
	e := ticketEntry{i, w.next}
	w.all.entries = append(w.all.entries, e)
	for _, k := range keys {
		q := w.near[k]
		if q == nil {
			q = &ticketQueue{}
			w.near[k] = q
		}
		q.entries = append(q.entries, e)
	}
}

// take removes and returns the executor that has waited longest among
// those whose input is in the first of keys to have one waiting, or,
// when none has, the one that has waited longest of all.
func (w *waitList) take(keys ...string) (int, bool) {
	if w.len() == 0 {
		return 0, false
	}
	for _, k := range keys {
		if q := w.near[k]; q != nil {
			if i, ok := w.front(q); ok {
				delete(w.ticket, i)
				return i, true
			}
		}
	}
	i, ok := w.front(&w.all)
	if ok {
		delete(w.ticket, i)
	}
	return i, ok
}

// front drops q's stale entries and returns its first live one.
func (w *waitList) front(q *ticketQueue) (int, bool) {
	for q.head < len(q.entries) {
		w.visits++
		e := q.entries[q.head]
		if t, ok := w.ticket[e.spec]; ok && t == e.ticket {
			return e.spec, true
		}
		q.entries[q.head] = ticketEntry{}
		q.head++
	}
	q.entries, q.head = q.entries[:0], 0
	return 0, false
}

// len returns how many executors wait.
func (w *waitList) len() int {
	if w == nil {
		return 0
	}
	return len(w.ticket)
}

// specs returns the waiting executors' spec indices in the order they
// wait.
func (w *waitList) specs() []int {
	if w.len() == 0 {
		return nil
	}
	out := make([]int, 0, w.len())
	for _, e := range w.all.entries[w.all.head:] {
		if t, ok := w.ticket[e.spec]; ok && t == e.ticket {
			out = append(out, e.spec)
		}
	}
	return out
}
