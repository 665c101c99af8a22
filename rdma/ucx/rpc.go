package ucx

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
)

// Request and reply messages over UCX (Listener, Dialer, Conn): what the
// parameter server's pulls and pushes travel as when the job's data link
// is UCX. The control of a session (who may open one, when it ends) is the
// caller's, over an authenticated channel of its own (the parameter
// server's gRPC connection): a Listener serves only the sessions it
// accepted, and only requests that carry the session's grant.
//
// A request is one tagged message from a Conn's worker to the Listener's:
// an envelope (the session's id and key), the caller's head and its body
// pieces, sent in place from the caller's buffers. The reply is one tagged
// message back on the endpoint the Listener made from the address the
// session was accepted with, so a caller that forged a grant would get
// nothing back either: a head and a payload, the payload received in
// place into the caller's buffer when its size is the one expected.
// Tags carry the message kind, the head's length and the request's id.

// ErrLost is wrapped by the error of a call whose session went away: the
// server's process ended (its control channel closed, or UCX reported the
// endpoint failed) or the session was closed.
var ErrLost = errors.New("ucx: session lost")

// ErrRefused is wrapped by the error of a call the Listener refused at
// once (a head too long to tag).
var ErrRefused = errors.New("ucx: request refused")

// Grant is what a caller needs besides the Listener's address to be
// served: the session's id and key. It must cross only an authenticated
// channel; whoever holds it can call on the session.
type Grant struct {
	ID  uint64
	Key [16]byte
}

// Bytes encodes g for the channel that carries it.
func (g Grant) Bytes() []byte {
	b := binary.LittleEndian.AppendUint64(nil, g.ID)
	return append(b, g.Key[:]...)
}

// GrantFromBytes decodes a grant encoded by Bytes.
func GrantFromBytes(b []byte) (Grant, error) {
	if len(b) != 8+16 {
		return Grant{}, errors.New("ucx: a session grant is 24 bytes")
	}
	g := Grant{ID: binary.LittleEndian.Uint64(b)}
	copy(g.Key[:], b[8:])
	return g, nil
}

// newGrant makes a fresh grant: a random id (never 0) and key.
func newGrant() (Grant, error) {
	var g Grant
	var id [8]byte
	for g.ID == 0 {
		if _, err := rand.Read(id[:]); err != nil {
			return Grant{}, err
		}
		g.ID = binary.LittleEndian.Uint64(id[:])
	}
	if _, err := rand.Read(g.Key[:]); err != nil {
		return Grant{}, err
	}
	return g, nil
}

// Message layout.
const (
	// envelopeBytes opens every request: the session id, its key, and
	// eight bytes kept zero.
	envelopeBytes = 32
	// MaxHeadBytes bounds a head, which a tag carries the length of.
	MaxHeadBytes = 1<<20 - 1
	kindRequest  = 1
	kindReply    = 2
	tagKindShift = 60
	tagHeadShift = 40
	tagIDMask    = 1<<40 - 1
	tagHeadMask  = MaxHeadBytes
	// maxBody is the most body pieces a request has.
	maxBody = 6
)

// rpcTag is the tag of a message of kind, head length head and id.
func rpcTag(kind uint64, head int, id uint64) uint64 {
	return kind<<tagKindShift | uint64(head)<<tagHeadShift | id&tagIDMask
}

// pad8 rounds n up to a multiple of 8, so what follows a head is aligned
// for the uint64 and float32 views of the parameter server.
func pad8(n int) int { return (n + 7) &^ 7 }
