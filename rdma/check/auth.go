package check

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
)

// EnvToken is the variable that carries the shared token, so it stays
// out of command lines and process listings.
const EnvToken = "SPINDLE_RDMA_CHECK_TOKEN"

// MinTokenLen is the shortest token accepted.
const MinTokenLen = 16

const (
	helloMagic = "SPXCHK1\n"
	nonceLen   = 16
	macLen     = sha256.Size
)

// Kinds of connection, sent after the handshake.
const (
	kindControl byte = 'c'
	kindData    byte = 'd'
)

// errTokenMismatch means the other end holds another token.
var errTokenMismatch = errors.New("the other end holds a different token")

// NewToken returns a random token.
func NewToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make a token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// CheckToken reports a token too short to be a secret.
func CheckToken(token string) error {
	if len(token) < MinTokenLen {
		return badInput("%s is %d bytes long: need at least %d (or let the listener make one)", EnvToken, len(token), MinTokenLen)
	}
	return nil
}

func proof(token, side string, a, b []byte) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte(side))
	m.Write(a)
	m.Write(b)
	return m.Sum(nil)
}

// dialHandshake proves to the listener on c that this end holds token and
// checks that the listener does, then says what the connection is for.
// The caller sets c's deadline.
func dialHandshake(c net.Conn, token string, kind byte, index byte) error {
	na := make([]byte, nonceLen)
	if _, err := rand.Read(na); err != nil {
		return err
	}
	if _, err := c.Write(append([]byte(helloMagic), na...)); err != nil {
		return err
	}
	reply := make([]byte, nonceLen+macLen)
	if _, err := io.ReadFull(c, reply); err != nil {
		return fmt.Errorf("read the listener's proof (is it spindle rdma check --listen?): %w", err)
	}
	nb := reply[:nonceLen]
	if !hmac.Equal(reply[nonceLen:], proof(token, "listener", na, nb)) {
		return errTokenMismatch
	}
	msg := append(proof(token, "peer", na, nb), kind, index)
	if _, err := c.Write(msg); err != nil {
		return err
	}
	var ok [1]byte
	if _, err := io.ReadFull(c, ok[:]); err != nil || ok[0] != 1 {
		return errTokenMismatch
	}
	return nil
}

// acceptHandshake checks that the dialer on c holds token, proving that
// this end does, and returns what the connection is for.
func acceptHandshake(c net.Conn, token string) (kind, index byte, err error) {
	hello := make([]byte, len(helloMagic)+nonceLen)
	if _, err := io.ReadFull(c, hello); err != nil {
		return 0, 0, err
	}
	if string(hello[:len(helloMagic)]) != helloMagic {
		return 0, 0, errors.New("not spindle rdma check")
	}
	na := hello[len(helloMagic):]
	nb := make([]byte, nonceLen)
	if _, err := rand.Read(nb); err != nil {
		return 0, 0, err
	}
	if _, err := c.Write(append(nb, proof(token, "listener", na, nb)...)); err != nil {
		return 0, 0, err
	}
	msg := make([]byte, macLen+2)
	if _, err := io.ReadFull(c, msg); err != nil {
		return 0, 0, err
	}
	if !hmac.Equal(msg[:macLen], proof(token, "peer", na, nb)) {
		c.Write([]byte{0})
		return 0, 0, errTokenMismatch
	}
	if _, err := c.Write([]byte{1}); err != nil {
		return 0, 0, err
	}
	return msg[macLen], msg[macLen+1], nil
}
