package hadooprpc

import (
	"crypto/cipher"
	"crypto/des"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rc4"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"sync"
)

// The DIGEST-MD5 names of the levels of hadoop.rpc.protection (RFC 2831
// qop values).
const (
	qopNameAuth     = "auth"
	qopNameAuthInt  = "auth-int"
	qopNameAuthConf = "auth-conf"
)

// digestQop is the qop value of a security-layer bit.
func digestQop(level byte) string {
	switch level {
	case qopIntegrity:
		return qopNameAuthInt
	case qopPrivacy:
		return qopNameAuthConf
	}
	return qopNameAuth
}

// digestLevel is the security-layer bit of a qop value, zero for one this
// package does not know.
func digestLevel(qop string) byte {
	switch strings.ToLower(strings.TrimSpace(qop)) {
	case qopNameAuth:
		return qopAuthentication
	case qopNameAuthInt:
		return qopIntegrity
	case qopNameAuthConf:
		return qopPrivacy
	}
	return 0
}

// digestCiphers are the auth-conf ciphers of RFC 2831 this package speaks,
// strongest first: the order servers offer them in and clients choose by
// (Java's DIGEST-MD5 puts 3des and rc4 first too). Two-key triple DES
// stands before RC4, whose keystream is known to be biased.
var digestCiphers = []string{"3des", "rc4", "des", "rc4-56", "rc4-40"}

// chooseCipher picks the strongest cipher of a challenge's comma-separated
// list that this package speaks, "" when none.
func chooseCipher(offered string) string {
	for _, c := range digestCiphers {
		if containsToken(offered, c) {
			return c
		}
	}
	return ""
}

// The magic constants of RFC 2831 section 2.3 and 2.4.
const (
	magicClientSign = "Digest session key to client-to-server signing key magic constant"
	magicServerSign = "Digest session key to server-to-client signing key magic constant"
	magicClientSeal = "Digest H(A1) to client-to-server sealing key magic constant"
	magicServerSeal = "Digest H(A1) to server-to-client sealing key magic constant"
)

// digestMACSize is what integrity adds to a message: the first ten bytes of
// HMAC-MD5, the message type 0x0001 and the sequence number.
const (
	digestMACSize   = 10
	digestTrailer   = 2 + 4
	digestMsgType   = 1
	digestOverhead  = digestMACSize + digestTrailer
	digestMaxPadLen = 8
)

// digestLayer is the RFC 2831 security layer of a DIGEST-MD5 connection at
// auth-int or auth-conf: every message carries an HMAC-MD5 under the
// direction's integrity key (Kic or Kis) over its sequence number and
// itself, and at auth-conf is encrypted, with its MAC and padding, under
// the direction's sealing key (Kcc or Kcs). Sequence numbers count from
// zero in each direction; a message out of turn is refused. The cipher
// state runs on across messages (RC4's keystream, DES's CBC chain), as
// Java's implementation has it.
type digestLayer struct {
	privacy    bool
	cipherName string // at privacy

	smu     sync.Mutex
	sendKi  []byte
	sendSeq uint32
	enc     digestCipher

	rmu     sync.Mutex
	recvKi  []byte
	recvSeq uint32
	dec     digestCipher
}

// newDigestLayer derives the keys of a connection from H(A1) for the side
// that is the client or not, at qop level (qopIntegrity or qopPrivacy) and
// with cipherName at privacy.
func newDigestLayer(ha1 [md5.Size]byte, level byte, cipherName string, client bool) (*digestLayer, error) {
	kic := md5.Sum(append(ha1[:], magicClientSign...))
	kis := md5.Sum(append(ha1[:], magicServerSign...))
	l := &digestLayer{privacy: level == qopPrivacy, sendKi: kic[:], recvKi: kis[:]}
	if l.privacy {
		l.cipherName = cipherName
	}
	if !client {
		l.sendKi, l.recvKi = kis[:], kic[:]
	}
	if !l.privacy {
		return l, nil
	}
	n := md5.Size
	switch cipherName {
	case "rc4-40":
		n = 5
	case "rc4-56":
		n = 7
	}
	kcc := md5.Sum(append(append([]byte{}, ha1[:n]...), magicClientSeal...))
	kcs := md5.Sum(append(append([]byte{}, ha1[:n]...), magicServerSeal...))
	sendKc, recvKc := kcc, kcs
	if !client {
		sendKc, recvKc = kcs, kcc
	}
	var err error
	if l.enc, err = newDigestCipher(cipherName, sendKc); err != nil {
		return nil, err
	}
	if l.dec, err = newDigestCipher(cipherName, recvKc); err != nil {
		return nil, err
	}
	return l, nil
}

// level reports the hadoop.rpc.protection level the layer gives.
func (l *digestLayer) level() byte {
	if l.privacy {
		return qopPrivacy
	}
	return qopIntegrity
}

// digestMAC is HMAC-MD5(ki, {seq, msg})[0..9].
func digestMAC(ki []byte, seq uint32, msg []byte) []byte {
	h := hmac.New(md5.New, ki)
	var s [4]byte
	binary.BigEndian.PutUint32(s[:], seq)
	h.Write(s[:])
	h.Write(msg)
	return h.Sum(nil)[:digestMACSize]
}

// wrap protects one message: {msg, MAC, 0x0001, seq} at integrity,
// {CIPHER(Kc, {msg, pad, MAC}), 0x0001, seq} at privacy.
func (l *digestLayer) wrap(msg []byte) ([]byte, error) {
	l.smu.Lock()
	defer l.smu.Unlock()
	seq := l.sendSeq
	l.sendSeq++
	mac := digestMAC(l.sendKi, seq, msg)
	var out []byte
	if !l.privacy {
		out = make([]byte, 0, len(msg)+digestOverhead)
		out = append(append(out, msg...), mac...)
	} else {
		plain := make([]byte, 0, len(msg)+digestMaxPadLen+digestOverhead)
		plain = append(plain, msg...)
		if bs := l.enc.blockSize(); bs > 1 {
			pad := bs - (len(msg)+digestMACSize)%bs
			for i := 0; i < pad; i++ {
				plain = append(plain, byte(pad))
			}
		}
		plain = append(plain, mac...)
		l.enc.encrypt(plain)
		out = plain
	}
	out = binary.BigEndian.AppendUint16(out, digestMsgType)
	return binary.BigEndian.AppendUint32(out, seq), nil
}

// unwrap checks one message from the other end and returns its content. A
// message refused leaves the layer as it was, except that at privacy the
// connection is not worth keeping anyway.
func (l *digestLayer) unwrap(tok []byte) ([]byte, error) {
	l.rmu.Lock()
	defer l.rmu.Unlock()
	if len(tok) < digestOverhead {
		return nil, fmt.Errorf("digest-md5: a wrapped message of %d bytes, shorter than its MAC", len(tok))
	}
	body, trailer := tok[:len(tok)-digestTrailer], tok[len(tok)-digestTrailer:]
	if t := binary.BigEndian.Uint16(trailer); t != digestMsgType {
		return nil, fmt.Errorf("digest-md5: message type %d, want %d", t, digestMsgType)
	}
	seq := binary.BigEndian.Uint32(trailer[2:])
	if seq != l.recvSeq {
		return nil, fmt.Errorf("digest-md5: message %d when %d was due (replayed, dropped or reordered)", seq, l.recvSeq)
	}
	var msg, mac []byte
	if !l.privacy {
		msg, mac = body[:len(body)-digestMACSize], body[len(body)-digestMACSize:]
	} else {
		plain, err := l.dec.decrypt(body, func(plain []byte) bool {
			m, ok := digestUnpad(plain, l.dec.blockSize())
			return ok && hmac.Equal(digestMAC(l.recvKi, seq, m), plain[len(plain)-digestMACSize:])
		})
		if err != nil {
			return nil, err
		}
		msg, _ = digestUnpad(plain, l.dec.blockSize())
		l.recvSeq++
		return msg, nil
	}
	if !hmac.Equal(digestMAC(l.recvKi, seq, msg), mac) {
		return nil, errors.New("digest-md5: a message's MAC does not match (altered on the way?)")
	}
	l.recvSeq++
	return msg, nil
}

// digestUnpad splits a decrypted {msg, pad, MAC} and returns msg; false
// when the padding is not what a block cipher's sender adds.
func digestUnpad(plain []byte, blockSize int) ([]byte, bool) {
	if len(plain) < digestMACSize {
		return nil, false
	}
	body := plain[:len(plain)-digestMACSize]
	if blockSize <= 1 {
		return body, true
	}
	if len(body) == 0 {
		return nil, false
	}
	pad := int(body[len(body)-1])
	if pad < 1 || pad > blockSize || pad > len(body) {
		return nil, false
	}
	for _, b := range body[len(body)-pad:] {
		if int(b) != pad {
			return nil, false
		}
	}
	return body[:len(body)-pad], true
}

// digestCipher is one direction of an auth-conf cipher, its state running
// across messages.
type digestCipher interface {
	blockSize() int
	// encrypt encrypts b in place (whole blocks for a block cipher).
	encrypt(b []byte)
	// decrypt returns b decrypted and keeps the new state only when ok
	// accepts the result; otherwise it reports the message refused.
	decrypt(b []byte, ok func(plain []byte) bool) ([]byte, error)
}

func newDigestCipher(name string, kc [md5.Size]byte) (digestCipher, error) {
	switch name {
	case "rc4", "rc4-56", "rc4-40":
		c, err := rc4.NewCipher(kc[:])
		if err != nil {
			return nil, fmt.Errorf("digest-md5: %s key: %w", name, err)
		}
		return &digestRC4{c: *c}, nil
	case "des":
		b, err := des.NewCipher(desKey(kc[:7]))
		if err != nil {
			return nil, fmt.Errorf("digest-md5: des key: %w", err)
		}
		return &digestCBC{b: b, iv: append([]byte{}, kc[8:16]...)}, nil
	case "3des":
		k1, k2 := desKey(kc[:7]), desKey(kc[7:14])
		b, err := des.NewTripleDESCipher(append(append(append([]byte{}, k1...), k2...), k1...))
		if err != nil {
			return nil, fmt.Errorf("digest-md5: 3des key: %w", err)
		}
		return &digestCBC{b: b, iv: append([]byte{}, kc[8:16]...)}, nil
	}
	return nil, fmt.Errorf("digest-md5: cipher %q is not one of %s", name, strings.Join(digestCiphers, ", "))
}

// desKey spreads 56 key bits over 8 bytes, seven to a byte, each byte with
// odd parity in its low bit (RFC 2831 section 2.4).
func desKey(k7 []byte) []byte {
	var v uint64
	for _, b := range k7 {
		v = v<<8 | uint64(b)
	}
	out := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		b := byte(v&0x7f) << 1
		v >>= 7
		if bits.OnesCount8(b)%2 == 0 {
			b |= 1
		}
		out[i] = b
	}
	return out
}

// digestRC4 is RC4's keystream, one per direction.
type digestRC4 struct{ c rc4.Cipher }

func (r *digestRC4) blockSize() int   { return 1 }
func (r *digestRC4) encrypt(b []byte) { r.c.XORKeyStream(b, b) }

func (r *digestRC4) decrypt(b []byte, ok func([]byte) bool) ([]byte, error) {
	next := r.c
	plain := make([]byte, len(b))
	next.XORKeyStream(plain, b)
	if !ok(plain) {
		return nil, errors.New("digest-md5: a sealed message does not decrypt to its MAC (altered on the way?)")
	}
	r.c = next
	return plain, nil
}

// digestCBC is DES or triple DES in CBC mode, the chain running across
// messages.
type digestCBC struct {
	b  cipher.Block
	iv []byte
}

func (c *digestCBC) blockSize() int { return c.b.BlockSize() }

func (c *digestCBC) encrypt(b []byte) {
	cipher.NewCBCEncrypter(c.b, c.iv).CryptBlocks(b, b)
	c.iv = append(c.iv[:0], b[len(b)-c.b.BlockSize():]...)
}

func (c *digestCBC) decrypt(b []byte, ok func([]byte) bool) ([]byte, error) {
	bs := c.b.BlockSize()
	if len(b) == 0 || len(b)%bs != 0 {
		return nil, fmt.Errorf("digest-md5: a sealed message of %d bytes, not whole %d-byte blocks", len(b), bs)
	}
	plain := make([]byte, len(b))
	cipher.NewCBCDecrypter(c.b, c.iv).CryptBlocks(plain, b)
	if !ok(plain) {
		return nil, errors.New("digest-md5: a sealed message does not decrypt to its MAC (altered on the way?)")
	}
	c.iv = append(c.iv[:0], b[len(b)-bs:]...)
	return plain, nil
}
