package collective

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The connection handshake. A dialer opens a TCP connection to a peer's
// listener and sends a hello; the listener answers with a reply that
// accepts or rejects it with a reason. Multi-byte fields are big-endian,
// except the byte-order mark, which is written in the sender's native
// order so that ranks of different endianness (which could not share raw
// tensors) refuse each other.
//
//	hello:  magic "SPCL" | version u16 | kind u8 | flags u8 | byte-order mark u32 (native)
//	        | from u32 | to u32 | world size u32
//	        | from incarnation u32 | to incarnation u32 | epoch u32
//	        | job id length u16 | job id
//	        | proof (present when flags has bit 0 set):
//	          timestamp i64 (unix seconds) | nonce [16] | mac [32]
//	reply:  status u8 (0 accepted, 1 rejected, 2 not yet) | reason length u16 | reason
//	        | reply mac [32] (only when accepting a hello with a proof)
//
// When the ranks hold a peer token (Config.Token), every hello carries a
// proof: mac is HMAC-SHA256(token, every byte of the hello before it), so
// it covers all the fields, the timestamp and the nonce. The listener
// refuses a hello whose mac does not verify, whose timestamp is more than
// maxClockSkew away from its own clock, or whose nonce it has seen before
// (it remembers nonces for as long as their timestamps stay acceptable).
// An accepting reply proves the listener's token in turn: reply mac is
// HMAC-SHA256(token, "SPCL reply" | the hello's mac). A listener without a
// token refuses hellos with a proof and the other way round, so ranks
// configured differently fail at once rather than run unauthenticated.
//
// A link connection then carries operation data from dialer to listener
// only. A notice connection carries one abort notice and its
// acknowledgement (a reply without a mac). A probe connection asks the
// listener what it is blocked on; the answer follows the reply:
//
//	notice: culprit rank u32 | code u8 | message length u16 | message
//	probe answer: receiving from rank i32 | sending to rank i32 (-1: none)
//	              | rank blamed i32 (-1: the listener has not failed)
//
// The incarnations number the processes that have held a rank: a rank
// replaced after its process was lost comes back with the next incarnation
// (Config.Incarnations), and the epoch, the sum of every rank's
// incarnation, numbers the memberships. A listener refuses for good a
// hello from an older incarnation of its sender than it expects (the
// dialer was replaced), or addressed to a newer incarnation of itself
// than its own (this listener was). It answers "not yet" (status 2) when
// the hello comes from a newer epoch than its own: the listener (a
// survivor that has not rejoined yet) has not heard of the replacement,
// and the dialer tries again until its connect timeout.
//
// Version 1 had no proof and no flags (the flags byte was always zero);
// version 2's probe answer had no rank blamed; version 3 had no
// incarnations.
const (
	protoMagic    = "SPCL"
	protoVersion  = 4
	byteOrderMark = 0x01020304

	kindLink   = 1
	kindNotice = 2
	kindProbe  = 3

	// The reply's status.
	statusAccepted = 0
	statusRejected = 1
	statusNotYet   = 2

	// flagProof marks a hello that carries a proof.
	flagProof = 1 << 0

	maxJobIDLen  = 1024
	maxReasonLen = 4096
	helloFixed   = 4 + 2 + 1 + 1 + 4 + 4 + 4 + 4 + 4 + 4 + 4 + 2
	nonceLen     = 16
	macLen       = sha256.Size
	proofLen     = 8 + nonceLen + macLen
)

// errBadMagic marks a connection that does not speak this protocol at all
// (a port scanner, a misdirected client): it is dropped without an answer.
var errBadMagic = errors.New("not a collective handshake")

type hello struct {
	version uint16
	kind    uint8
	flags   uint8
	order   uint32
	from    uint32
	to      uint32
	world   uint32
	fromInc uint32 // the sender's incarnation
	toInc   uint32 // the incarnation of the listener the sender expects
	epoch   uint32 // the sum of all incarnations the sender knows of
	jobID   string
	proof   *proof // nil: none; set exactly when flags has flagProof
}

// proof is a hello's evidence that its sender holds the job's peer token.
type proof struct {
	timestamp int64 // unix seconds
	nonce     [nonceLen]byte
	mac       [macLen]byte
}

// encodeHello returns h as sent, up to and including the proof's nonce:
// the bytes a proof's mac covers. The mac itself is left to the caller.
func encodeHello(h hello) ([]byte, error) {
	if len(h.jobID) > maxJobIDLen {
		return nil, fmt.Errorf("job id is %d bytes long, at most %d allowed", len(h.jobID), maxJobIDLen)
	}
	b := make([]byte, helloFixed, helloFixed+len(h.jobID)+proofLen)
	copy(b, protoMagic)
	binary.BigEndian.PutUint16(b[4:], h.version)
	b[6] = h.kind
	b[7] = h.flags
	binary.NativeEndian.PutUint32(b[8:], h.order)
	binary.BigEndian.PutUint32(b[12:], h.from)
	binary.BigEndian.PutUint32(b[16:], h.to)
	binary.BigEndian.PutUint32(b[20:], h.world)
	binary.BigEndian.PutUint32(b[24:], h.fromInc)
	binary.BigEndian.PutUint32(b[28:], h.toInc)
	binary.BigEndian.PutUint32(b[32:], h.epoch)
	binary.BigEndian.PutUint16(b[36:], uint16(len(h.jobID)))
	b = append(b, h.jobID...)
	if h.proof != nil {
		b = binary.BigEndian.AppendUint64(b, uint64(h.proof.timestamp))
		b = append(b, h.proof.nonce[:]...)
	}
	return b, nil
}

func writeHello(w io.Writer, h hello) error {
	if (h.proof != nil) != (h.flags&flagProof != 0) {
		return fmt.Errorf("hello flags %#x disagree with its proof", h.flags)
	}
	b, err := encodeHello(h)
	if err != nil {
		return err
	}
	if h.proof != nil {
		b = append(b, h.proof.mac[:]...)
	}
	_, err = w.Write(b)
	return err
}

func readHello(r io.Reader) (hello, error) {
	var b [helloFixed]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return hello{}, err
	}
	if string(b[:4]) != protoMagic {
		return hello{}, errBadMagic
	}
	h := hello{
		version: binary.BigEndian.Uint16(b[4:]),
		kind:    b[6],
		flags:   b[7],
		order:   binary.NativeEndian.Uint32(b[8:]),
		from:    binary.BigEndian.Uint32(b[12:]),
		to:      binary.BigEndian.Uint32(b[16:]),
		world:   binary.BigEndian.Uint32(b[20:]),
		fromInc: binary.BigEndian.Uint32(b[24:]),
		toInc:   binary.BigEndian.Uint32(b[28:]),
		epoch:   binary.BigEndian.Uint32(b[32:]),
	}
	n := int(binary.BigEndian.Uint16(b[36:]))
	if n > maxJobIDLen {
		return hello{}, fmt.Errorf("job id length %d exceeds %d", n, maxJobIDLen)
	}
	job := make([]byte, n)
	if _, err := io.ReadFull(r, job); err != nil {
		return hello{}, err
	}
	h.jobID = string(job)
	if h.flags&flagProof != 0 {
		var pb [proofLen]byte
		if _, err := io.ReadFull(r, pb[:]); err != nil {
			return hello{}, err
		}
		p := &proof{timestamp: int64(binary.BigEndian.Uint64(pb[:]))}
		copy(p.nonce[:], pb[8:])
		copy(p.mac[:], pb[8+nonceLen:])
		h.proof = p
	}
	return h, nil
}

func writeStatus(w io.Writer, status uint8, msg string) error {
	if len(msg) > maxReasonLen {
		msg = msg[:maxReasonLen]
	}
	b := make([]byte, 3, 3+len(msg))
	b[0] = status
	binary.BigEndian.PutUint16(b[1:], uint16(len(msg)))
	b = append(b, msg...)
	_, err := w.Write(b)
	return err
}

func readStatus(r io.Reader) (status uint8, msg string, err error) {
	var b [3]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, "", err
	}
	n := int(binary.BigEndian.Uint16(b[1:]))
	if n > maxReasonLen {
		return 0, "", fmt.Errorf("message length %d exceeds %d", n, maxReasonLen)
	}
	m := make([]byte, n)
	if _, err := io.ReadFull(r, m); err != nil {
		return 0, "", err
	}
	return b[0], string(m), nil
}

// notice tells a rank that the sender gave up on the communicator and whom
// it blames.
type notice struct {
	culprit uint32
	code    failCode
	msg     string
}

func writeNotice(w io.Writer, n notice) error {
	msg := n.msg
	if len(msg) > maxReasonLen {
		msg = msg[:maxReasonLen]
	}
	b := make([]byte, 7, 7+len(msg))
	binary.BigEndian.PutUint32(b, n.culprit)
	b[4] = uint8(n.code)
	binary.BigEndian.PutUint16(b[5:], uint16(len(msg)))
	b = append(b, msg...)
	_, err := w.Write(b)
	return err
}

func readNotice(r io.Reader) (notice, error) {
	var b [7]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return notice{}, err
	}
	n := notice{culprit: binary.BigEndian.Uint32(b[:]), code: failCode(b[4])}
	l := int(binary.BigEndian.Uint16(b[5:]))
	if l > maxReasonLen {
		return notice{}, fmt.Errorf("message length %d exceeds %d", l, maxReasonLen)
	}
	m := make([]byte, l)
	if _, err := io.ReadFull(r, m); err != nil {
		return notice{}, err
	}
	n.msg = string(m)
	return n, nil
}

// probeAnswer says which peers a rank is blocked on, if any.
type probeAnswer struct {
	recvFrom int // -1: not receiving
	sendTo   int // -1: not sending
	// culprit is the rank a member that has already failed blames; -1
	// while it has not failed (or blames no rank).
	culprit int
}

func writeProbeAnswer(w io.Writer, a probeAnswer) error {
	var b [12]byte
	binary.BigEndian.PutUint32(b[:], uint32(int32(a.recvFrom)))
	binary.BigEndian.PutUint32(b[4:], uint32(int32(a.sendTo)))
	binary.BigEndian.PutUint32(b[8:], uint32(int32(a.culprit)))
	_, err := w.Write(b[:])
	return err
}

func readProbeAnswer(r io.Reader) (probeAnswer, error) {
	var b [12]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return probeAnswer{}, err
	}
	return probeAnswer{
		recvFrom: int(int32(binary.BigEndian.Uint32(b[:]))),
		sendTo:   int(int32(binary.BigEndian.Uint32(b[4:]))),
		culprit:  int(int32(binary.BigEndian.Uint32(b[8:]))),
	}, nil
}
