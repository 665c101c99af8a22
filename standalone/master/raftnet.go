package master

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// The Raft transport runs over TCP connections that start with a mutual
// challenge-response proving both ends hold the cluster secret:
//
//	dialer -> listener: magic "SPNDLRFT", version 1, 32-byte nonce a
//	listener -> dialer: 32-byte nonce b, HMAC(secret, "listener", a, b)
//	dialer -> listener: HMAC(secret, "dialer", a, b)
//	listener -> dialer: one byte 1 (accepted)
//
// Neither side sends the secret, and fresh nonces on both sides stop
// replays. The stream is not encrypted unless TLS files are configured, in
// which case the handshake runs inside mutual TLS.

var raftMagic = []byte("SPNDLRFT\x01")

// errRaftAuth is returned when a peer fails the handshake.
var errRaftAuth = errors.New("master: raft peer failed authentication")

// streamLayer implements raft.StreamLayer over authenticated connections.
type streamLayer struct {
	ln        net.Listener
	advertise net.Addr
	secret    []byte
	serverTLS *tls.Config
	clientTLS func(host string) *tls.Config
	handshake time.Duration // bounds a connection's authentication
	logger    *slog.Logger

	accepted chan net.Conn
	closed   chan struct{}
	once     sync.Once
	wg       sync.WaitGroup

	// live holds the accepted connections, closed with the layer: the
	// transport itself never closes the connections it accepted.
	mu   sync.Mutex
	live map[*trackedConn]bool
}

// trackedConn removes itself from the layer's live set when closed.
type trackedConn struct {
	net.Conn
	s    *streamLayer
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.live, c)
		c.s.mu.Unlock()
	})
	return c.Conn.Close()
}

var _ raft.StreamLayer = (*streamLayer)(nil)

func newStreamLayer(ln net.Listener, advertise string, secret []byte, serverTLS *tls.Config,
	clientTLS func(string) *tls.Config, handshake time.Duration, logger *slog.Logger) (*streamLayer, error) {
	adv, err := net.ResolveTCPAddr("tcp", advertise)
	if err != nil {
		return nil, fmt.Errorf("resolve raft address %s: %w", advertise, err)
	}
	if adv.IP == nil || adv.IP.IsUnspecified() {
		return nil, fmt.Errorf("%w: raft address %s is not one other masters can dial", ErrConfig, advertise)
	}
	s := &streamLayer{
		ln: ln, advertise: adv, secret: secret, serverTLS: serverTLS, clientTLS: clientTLS, handshake: handshake, logger: logger,
		accepted: make(chan net.Conn), closed: make(chan struct{}), live: map[*trackedConn]bool{},
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

func (s *streamLayer) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.closed:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.logger.Warn("raft accept failed", "err", err)
			select {
			case <-s.closed:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			conn, err := s.serverHandshake(c)
			if err != nil {
				s.logger.Warn("refused raft connection", "remote", c.RemoteAddr().String(), "err", err)
				_ = c.Close()
				return
			}
			tc := &trackedConn{Conn: conn, s: s}
			s.mu.Lock()
			s.live[tc] = true
			s.mu.Unlock()
			select {
			case s.accepted <- tc:
			case <-s.closed:
				_ = tc.Close()
			}
		}()
	}
}

func (s *streamLayer) mac(role string, a, b []byte) []byte {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(role))
	m.Write(a)
	m.Write(b)
	return m.Sum(nil)
}

func (s *streamLayer) serverHandshake(c net.Conn) (net.Conn, error) {
	if s.serverTLS != nil {
		c = tls.Server(c, s.serverTLS)
	}
	_ = c.SetDeadline(time.Now().Add(s.handshake))
	hello := make([]byte, len(raftMagic)+32)
	if _, err := io.ReadFull(c, hello); err != nil {
		return nil, fmt.Errorf("read hello: %w", err)
	}
	if !bytes.Equal(hello[:len(raftMagic)], raftMagic) {
		return nil, fmt.Errorf("%w: not a spindle raft peer", errRaftAuth)
	}
	a := hello[len(raftMagic):]
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	if _, err := c.Write(append(append([]byte(nil), b...), s.mac("listener", a, b)...)); err != nil {
		return nil, fmt.Errorf("write challenge: %w", err)
	}
	proof := make([]byte, sha256.Size)
	if _, err := io.ReadFull(c, proof); err != nil {
		return nil, fmt.Errorf("read proof: %w", err)
	}
	if !hmac.Equal(proof, s.mac("dialer", a, b)) {
		return nil, fmt.Errorf("%w: wrong cluster secret", errRaftAuth)
	}
	if _, err := c.Write([]byte{1}); err != nil {
		return nil, fmt.Errorf("write accept: %w", err)
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// Dial connects to another master and proves the secret both ways.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(address), timeout)
	if err != nil {
		return nil, err
	}
	conn, err := s.clientHandshake(c, string(address))
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("raft handshake with %s: %w", address, err)
	}
	return conn, nil
}

func (s *streamLayer) clientHandshake(c net.Conn, address string) (net.Conn, error) {
	if s.clientTLS != nil {
		host, _, _ := net.SplitHostPort(address)
		if tc := s.clientTLS(host); tc != nil {
			c = tls.Client(c, tc)
		}
	}
	_ = c.SetDeadline(time.Now().Add(s.handshake))
	a := make([]byte, 32)
	if _, err := rand.Read(a); err != nil {
		return nil, err
	}
	if _, err := c.Write(append(append([]byte(nil), raftMagic...), a...)); err != nil {
		return nil, fmt.Errorf("write hello: %w", err)
	}
	resp := make([]byte, 32+sha256.Size)
	if _, err := io.ReadFull(c, resp); err != nil {
		return nil, fmt.Errorf("read challenge: %w", err)
	}
	b := resp[:32]
	if !hmac.Equal(resp[32:], s.mac("listener", a, b)) {
		return nil, fmt.Errorf("%w: the listener does not hold the cluster secret", errRaftAuth)
	}
	if _, err := c.Write(s.mac("dialer", a, b)); err != nil {
		return nil, fmt.Errorf("write proof: %w", err)
	}
	ok := make([]byte, 1)
	if _, err := io.ReadFull(c, ok); err != nil || ok[0] != 1 {
		return nil, fmt.Errorf("%w: refused by the listener", errRaftAuth)
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// Accept returns the next authenticated connection.
func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.accepted:
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	}
}

// Close stops accepting and waits for handshakes under way.
func (s *streamLayer) Close() error {
	var err error
	s.once.Do(func() {
		close(s.closed)
		err = s.ln.Close()
		s.wg.Wait()
		s.mu.Lock()
		live := make([]*trackedConn, 0, len(s.live))
		for c := range s.live {
			live = append(live, c)
		}
		s.mu.Unlock()
		for _, c := range live {
			_ = c.Close()
		}
	})
	return err
}

// Addr returns the advertised address.
func (s *streamLayer) Addr() net.Addr { return s.advertise }
