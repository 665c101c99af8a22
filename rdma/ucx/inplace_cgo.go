//go:build cgo && linux

package ucx

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"fmt"
	"os"
	"time"
	"unsafe"
)

// RecvInPlace implements the collectives' in-place receive: the messages
// of the next n bytes from peer all land at once, one after another, in
// the direction's landing buffer (C memory, reused call after call), and
// fn is handed each run of them that has landed, in order, while the
// later ones are still landing. The ring's reduction thus reads a piece
// as soon as it is there, in the same memory UCX put it, instead of
// receiving one scratch-sized piece at a time and only then asking for
// the next; and the sender's rendezvous requests, which end only when
// this rank has taken their data, end sooner. It declines (ok false,
// nothing received) when the last call left part of a message to read,
// and over shared memory (servesInPlace).
func (e *engine) RecvInPlace(ctx context.Context, peer, n, align int, _ []byte, fn func([]byte)) (bool, error) {
	e.life.RLock()
	defer e.life.RUnlock()
	d, ep := e.in[peer], e.eps[peer]
	if d == nil || ep == nil {
		return false, nil
	}
	if err := e.check(ctx, d, ep, false); err != nil {
		return true, err
	}
	if len(d.leftover) > 0 || n <= 0 || align <= 0 || !e.servesInPlace(d, ep) {
		return false, nil
	}
	if n > d.landCap {
		// No request of d is under way: each call ends with all of its
		// requests ended, or leaves d broken.
		C.free(d.land)
		d.land, d.landCap = C.malloc(C.size_t(n)), n
	}
	land := unsafe.Slice((*byte)(d.land), n)
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, e.signal)
		defer stop()
	}
	rs := e.startRecv(d)
	handed, head := 0, 0 // bytes of land given to fn; the first request not known to have ended
	for {
		e.mu.Lock()
		pending, failed, err := e.pollRecv(d, peer, land, 0, &rs)
		if err != nil {
			e.mu.Unlock()
			return true, e.fail(d, err)
		}
		landed := 0
		for head < len(d.reqs) && d.reqs[head] == nil {
			head++
		}
		if head > 0 {
			landed = d.ends[head-1]
		}
		switch {
		case failed != statusOK:
			err = statusError(failed)
		case pending == 0 && (rs.posted == n || rs.staged > 0):
			e.mu.Unlock()
			e.finishRecv(d, land, rs.posted, rs.staged, rs.stageWant)
			handPieces(land[handed:], align, true, fn)
			return true, nil
		case landed-handed >= align:
			e.mu.Unlock()
			handed += handPieces(land[handed:landed], align, false, fn)
			continue
		case time.Now().After(rs.deadline):
			err = fmt.Errorf("ucx: no progress from rank %d for %s: %w", peer, e.timeout, os.ErrDeadlineExceeded)
		default:
			err = e.check(ctx, d, ep, time.Since(rs.moved) >= lostGrace)
		}
		if err != nil {
			e.mu.Unlock()
			return true, e.fail(d, err)
		}
		e.pause(rs.moved, rs.deadline)
	}
}

// servesInPlace reports whether RecvInPlace takes d's receives: not when
// its endpoint is over shared memory, where receiving one piece at a
// time into the caller's scratch buffer, which stays in cache for the
// reduction, measured as fast or faster (docs/rdma.md).
func (e *engine) servesInPlace(d *direction, ep *C.spx_ep) bool {
	if d.inPlace == 0 {
		buf := (*C.char)(C.malloc(epInfoBytes))
		e.mu.Lock()
		over := overWhat(epTransports(ep, buf))
		e.mu.Unlock()
		C.free(unsafe.Pointer(buf))
		d.inPlace = 1
		if over == overSharedMemory {
			d.inPlace = -1
		}
	}
	return d.inPlace > 0
}

// handPieces gives fn the whole multiples of align at the start of b, or
// all of b when final (the receive's last bytes: n need not be a whole
// multiple), and returns how many bytes it gave. b starts at an address
// aligned for align: the landing buffer is C memory aligned for any
// element, and every piece handed before is a whole multiple.
func handPieces(b []byte, align int, final bool, fn func([]byte)) int {
	give := len(b)
	if !final {
		give = give / align * align
	}
	if give > 0 {
		fn(b[:give])
	}
	return give
}
