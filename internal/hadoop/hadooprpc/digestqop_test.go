package hadooprpc

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// javaPeer is the JDK's DIGEST-MD5 (com.sun.security.sasl.digest, which
// Hadoop's TOKEN authentication runs on) in a child process, driven over
// its stdin and stdout (testdata/DigestPeer.java).
type javaPeer struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Reader
	cmd *exec.Cmd
}

// startJavaPeer compiles DigestPeer.java once per test and starts it with
// args; the test is skipped where there is no JDK.
func startJavaPeer(t *testing.T, classes string, args ...string) *javaPeer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, "java", append(append(slices.Clone(peerJVM), "-cp", classes, "DigestPeer"), args...)...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &javaPeer{t: t, in: in, out: bufio.NewReader(out), cmd: cmd}
	t.Cleanup(func() {
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("java peer: %v\n%s", err, stderr.String())
		}
	})
	return p
}

// peerJVM is how the peers' JVMs run: each does one exchange, so C1's
// code and the serial collector, not C2 compiling on the side.
var peerJVM = []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"}

func compileJavaPeer(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("javac"); err != nil {
		t.Skip("no JDK (javac) to check DIGEST-MD5 against")
	}
	dir := t.TempDir()
	if out, err := exec.Command("javac", "-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", "-d", dir, filepath.Join("testdata", "DigestPeer.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	return dir
}

func (p *javaPeer) send(b []byte) {
	p.t.Helper()
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	if _, err := p.in.Write(append(n[:], b...)); err != nil {
		p.t.Fatalf("write to the java peer: %v", err)
	}
}

func (p *javaPeer) recv() []byte {
	p.t.Helper()
	var hdr [5]byte
	if _, err := io.ReadFull(p.out, hdr[:]); err != nil {
		p.t.Fatalf("read from the java peer: %v", err)
	}
	b := make([]byte, binary.BigEndian.Uint32(hdr[1:]))
	if _, err := io.ReadFull(p.out, b); err != nil {
		p.t.Fatalf("read from the java peer: %v", err)
	}
	if hdr[0] == 'E' {
		p.t.Fatalf("the java peer failed: %s", b)
	}
	return b
}

// echo sends messages through layer to the peer, which answers each with
// "echo:" and the message, wrapped; the replies must unwrap to that.
func (p *javaPeer) echo(layer securityLayer) {
	p.t.Helper()
	for _, msg := range [][]byte{[]byte("first"), bytes.Repeat([]byte("0123456789abcdef"), 4001), []byte("x"), []byte("last message, odd length")} {
		w, err := layer.wrap(msg)
		if err != nil {
			p.t.Fatal(err)
		}
		p.send(w)
		got, err := layer.unwrap(p.recv())
		if err != nil {
			p.t.Fatalf("unwrap the java peer's reply to %d bytes: %v", len(msg), err)
		}
		if want := append([]byte("echo:"), msg...); !bytes.Equal(got, want) {
			p.t.Fatalf("reply of %d bytes, want %d", len(got), len(want))
		}
	}
	p.send(nil) // an empty frame ends the peer's loop
}

// TestDigestJavaInterop checks Spindle's DIGEST-MD5, both ends, against the
// JDK's, which Hadoop's servers and clients run: the response and rspauth
// values, and every message of auth-int and of auth-conf with each cipher
// wrapped by one and unwrapped by the other, both ways.
func TestDigestJavaInterop(t *testing.T) {
	classes := compileJavaPeer(t)
	tok := Token{Identifier: []byte("\x00\x05alice\x02rm\x00token-identifier"), Password: []byte("the token's password, 20b")}
	user, password := base64.StdEncoding.EncodeToString(tok.Identifier), base64.StdEncoding.EncodeToString(tok.Password)
	lookup := func(id []byte) ([]byte, string, error) {
		if !bytes.Equal(id, tok.Identifier) {
			return nil, "", fmt.Errorf("unknown token %q", id)
		}
		return tok.Password, "alice", nil
	}

	// Spindle's client, the JDK's server (as a Hadoop namenode).
	for _, tc := range []struct{ serverQop, protection, want string }{
		{"auth", "", "auth null"},
		{"auth-int", "integrity", "auth-int null"},
		{"auth-conf", "privacy", "auth-conf high"},
		{"auth-conf,auth-int,auth", "privacy,integrity", "auth-conf high"},
		{"auth,auth-int", "privacy,integrity,authentication", "auth-int null"},
	} {
		t.Run("java server "+tc.serverQop+" client "+tc.protection, func(t *testing.T) {
			p := startJavaPeer(t, classes, "server", tc.serverQop, user, password)
			dc, err := newDigestClient(p.recv(), tok, digestURI, tc.protection, "java", settingRPC)
			if err != nil {
				t.Fatal(err)
			}
			p.send(dc.response)
			layer, err := dc.finish(p.recv())
			if err != nil {
				t.Fatal(err)
			}
			if got := string(p.recv()); got != tc.want {
				t.Fatalf("the JDK negotiated %q, want %q", got, tc.want)
			}
			if layer == nil {
				p.send(nil)
				return
			}
			p.echo(layer)
		})
	}
	// The JDK's client naming the token's user as authorization id, as
	// Hadoop's data-transfer client does; another id is refused.
	for _, tc := range []struct {
		name, authzid string
		ok            bool
	}{{"authzid of the token", user, true}, {"another authzid", "aGRmcw==", false}} {
		t.Run("java client "+tc.name, func(t *testing.T) {
			p := startJavaPeer(t, classes, "client", "auth-int", "-", user, password, tc.authzid)
			challenge, nonce := digestChallenge([]byte{qopIntegrity}, 0)
			p.send([]byte(challenge))
			v, err := verifyDigest(p.recv(), nonce, digestURI, qopIntegrity, lookup)
			if !tc.ok {
				if err == nil || !strings.Contains(err.Error(), "asks to act as") {
					t.Fatalf("authzid %q: %v", tc.authzid, err)
				}
				p.send([]byte("rspauth=0"))
				p.recvAny()
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p.send([]byte("rspauth=" + v.rspauth))
			p.recv()
			p.echo(v.layer)
		})
	}
	t.Run("java server requires privacy", func(t *testing.T) {
		p := startJavaPeer(t, classes, "server", "auth-conf", user, password)
		_, err := newDigestClient(p.recv(), tok, digestURI, "integrity,authentication", "the server at nn1", settingRPC)
		if !errors.Is(err, ErrProtection) || !strings.Contains(err.Error(), "the server at nn1 requires hadoop.rpc.protection privacy") ||
			!strings.Contains(err.Error(), "configured for authentication,integrity") {
			t.Fatalf("%v", err)
		}
		p.send(nil) // not a response: the JDK fails, which is fine
		if b := p.recvAny(); len(b) == 0 {
			t.Fatal("the JDK accepted an empty response")
		}
	})

	// The JDK's client (as an executor of a Java framework), Spindle's
	// server, every cipher.
	for _, tc := range []struct{ clientQop, cipher, server, want string }{
		{"auth", "-", "", "auth"},
		{"auth-int", "-", "integrity", "auth-int"},
		{"auth-conf", "-", "privacy", "auth-conf 3des"},
		{"auth-conf", "rc4", "privacy", "auth-conf rc4"},
		{"auth-conf", "des", "privacy", "auth-conf des"},
		{"auth-conf", "rc4-56", "privacy", "auth-conf rc4-56"},
		{"auth-conf", "rc4-40", "privacy", "auth-conf rc4-40"},
		{"auth-conf,auth-int", "-", "integrity,privacy", "auth-conf 3des"},
	} {
		t.Run("java client "+tc.clientQop+" "+tc.cipher, func(t *testing.T) {
			p := startJavaPeer(t, classes, "client", tc.clientQop, tc.cipher, user, password)
			levels, err := ParseProtection(tc.server)
			if err != nil {
				t.Fatal(err)
			}
			challenge, nonce := digestChallenge(levels, 0)
			p.send([]byte(challenge))
			v, err := verifyDigest(p.recv(), nonce, digestURI, maskOf(levels), lookup)
			if err != nil {
				t.Fatal(err)
			}
			if v.user != "alice" {
				t.Fatalf("user %q", v.user)
			}
			p.send([]byte("rspauth=" + v.rspauth))
			qop, _, _ := strings.Cut(string(p.recv()), " ")
			got := qop
			if l, ok := v.layer.(*digestLayer); ok && l.cipherName != "" {
				got += " " + l.cipherName
			}
			if got != tc.want {
				t.Fatalf("negotiated %q, want %q", got, tc.want)
			}
			if v.layer == nil {
				p.send(nil)
				return
			}
			p.echo(v.layer)
		})
	}
}

// recvAny reads one frame of either kind.
func (p *javaPeer) recvAny() []byte {
	p.t.Helper()
	var hdr [5]byte
	if _, err := io.ReadFull(p.out, hdr[:]); err != nil {
		return nil
	}
	b := make([]byte, binary.BigEndian.Uint32(hdr[1:]))
	io.ReadFull(p.out, b)
	return b
}

// TestDigestLayer: at auth-int and with every auth-conf cipher, messages
// go both ways, and a message altered, replayed, reordered, truncated,
// sent back by the wrong end or with another type is refused without
// disturbing the next good one.
func TestDigestLayer(t *testing.T) {
	ha1 := md5.Sum([]byte("H(A1) of some exchange"))
	for _, cipherName := range append([]string{""}, digestCiphers...) {
		name, level := "auth-int", byte(qopIntegrity)
		if cipherName != "" {
			name, level = "auth-conf "+cipherName, qopPrivacy
		}
		t.Run(name, func(t *testing.T) {
			client, err := newDigestLayer(ha1, level, cipherName, true)
			if err != nil {
				t.Fatal(err)
			}
			server, err := newDigestLayer(ha1, level, cipherName, false)
			if err != nil {
				t.Fatal(err)
			}
			secret := []byte("a path nobody may read")
			first := must(client.wrap(secret))
			if got := bytes.Contains(first, secret); got == (level == qopPrivacy) {
				t.Fatalf("the message readable in its wrapping: %v", got)
			}
			if got, err := server.unwrap(first); err != nil || !bytes.Equal(got, secret) {
				t.Fatalf("unwrap: %q, %v", got, err)
			}
			second := must(client.wrap([]byte("second message")))
			third := must(client.wrap([]byte("third")))
			flip := func(b []byte, i int) []byte {
				c := append([]byte{}, b...)
				c[i] ^= 1
				return c
			}
			for what, tok := range map[string][]byte{
				"altered message":      flip(second, 0),
				"altered MAC":          flip(second, len(second)-digestTrailer-1),
				"another message type": flip(second, len(second)-5),
				"replayed":             first,
				"reordered":            third,
				"wrong end":            must(must2(newDigestLayer(ha1, level, cipherName, false)).wrap([]byte("x"))),
				"truncated":            second[:10],
				"empty":                {},
			} {
				if _, err := server.unwrap(tok); err == nil {
					t.Errorf("%s accepted", what)
				}
			}
			for _, want := range []string{"second message", "third"} {
				tok := map[string][]byte{"second message": second, "third": third}[want]
				if got, err := server.unwrap(tok); err != nil || string(got) != want {
					t.Fatalf("unwrap after refusals: %q, %v", got, err)
				}
			}
			// And the other way.
			back := must(server.wrap([]byte("answer")))
			if got, err := client.unwrap(back); err != nil || string(got) != "answer" {
				t.Fatalf("the server's message: %q, %v", got, err)
			}
		})
	}
}

// TestDESKey checks the RFC 2831 spreading of 56 key bits over 8 bytes
// with odd parity.
func TestDESKey(t *testing.T) {
	for _, tc := range []struct{ in, want []byte }{
		{[]byte{0, 0, 0, 0, 0, 0, 0}, []byte{1, 1, 1, 1, 1, 1, 1, 1}},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, []byte{0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe}},
		// 0x80 in the top bit: 1000000 0000000 ... -> 0x80 then zeros.
		{[]byte{0x80, 0, 0, 0, 0, 0, 0}, []byte{0x80, 1, 1, 1, 1, 1, 1, 1}},
		{[]byte{0, 0, 0, 0, 0, 0, 1}, []byte{1, 1, 1, 1, 1, 1, 1, 0x02}},
	} {
		if got := desKey(tc.in); !bytes.Equal(got, tc.want) {
			t.Errorf("desKey(%x) = %x, want %x", tc.in, got, tc.want)
		}
	}
}

func must2[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestTokenProtection runs calls with TOKEN authentication at each level of
// hadoop.rpc.protection between Spindle's client and server: the server
// sees the level negotiated, calls larger than the server's maxbuf go
// through in several wrapped messages no larger than it, and what crosses
// the wire is readable at authentication and integrity and not at privacy.
// Ends that share no level refuse each other, naming the setting.
func TestTokenProtection(t *testing.T) {
	tok := Token{Identifier: []byte("owner=alice,seq=7"), Password: []byte("pw-of-the-token"), Kind: KindHDFSDelegationToken, Service: "nn"}
	lookup := func(id []byte) ([]byte, string, error) {
		if !bytes.Equal(id, tok.Identifier) {
			return nil, "", fmt.Errorf("unknown token %q", id)
		}
		return tok.Password, "alice", nil
	}
	// A few times the server's maxbuf: enough to need several wrapped
	// messages each way. Not more: triple DES under the race detector
	// costs seconds per 100 KiB on a loaded machine.
	secret := "a-path-nobody-may-read-" + strings.Repeat("x", 3*8192)
	for _, tc := range []struct {
		name, server, client, want string
		readable                   bool
	}{
		{"authentication", "", "", ProtectionAuthentication, true},
		{"integrity", "integrity", "integrity", ProtectionIntegrity, true},
		{"privacy", "privacy", "privacy", ProtectionPrivacy, false},
		{"client prefers privacy", "authentication,integrity,privacy", "privacy,integrity", ProtectionPrivacy, false},
		{"server offers several, client takes integrity", "privacy,integrity", "integrity,privacy", ProtectionIntegrity, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := startServer(t, ServerConfig{Name: "test", SASL: TokenServer{Lookup: lookup, Protection: tc.server, maxBuf: 8192}})
			var wire packetLog
			c := dial(t, addr, ClientConfig{Dial: wire.dial, SASL: TokenAuth{Token: tok, Protection: tc.client}})
			for i := 0; i < 3; i++ {
				resp, err := callFileInfo(c, "/"+secret)
				if err != nil {
					t.Fatal(err)
				}
				if string(resp.GetFs().GetPath()) != "/"+secret || resp.GetFs().GetGroup() != "alice" {
					t.Fatalf("call %d: path of %d bytes, real user %q", i, len(resp.GetFs().GetPath()), resp.GetFs().GetGroup())
				}
				if got := resp.GetFs().GetSymlink(); string(got) != tc.want {
					t.Fatalf("the server saw protection %q, want %q", got, tc.want)
				}
			}
			if got := wire.contains("a-path-nobody-may-read"); got != tc.readable {
				t.Fatalf("the request readable on the wire: %v, want %v", got, tc.readable)
			}
			// Wrapped, a 24 KiB call travels in tokens the server takes:
			// no packet larger than its maxbuf and the framing around it.
			if tc.want != ProtectionAuthentication {
				if n := wire.largestWrite(); n > 8192+64 {
					t.Fatalf("the client wrote a %d-byte packet to a server whose maxbuf is 8192", n)
				}
			}
		})
	}
	for _, tc := range []struct{ name, server, client, says string }{
		{"privacy required, authentication configured", "privacy", "", "requires hadoop.rpc.protection privacy of token connections, and this client is configured for authentication"},
		{"integrity required, privacy configured", "integrity", "privacy", "requires hadoop.rpc.protection integrity"},
		{"authentication only, privacy configured", "authentication", "privacy", "configured for privacy"},
		{"bad setting", "", "secret", `"secret" is not authentication, integrity or privacy`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
			defer cancel()
			addr := startServer(t, ServerConfig{Name: "test", SASL: TokenServer{Lookup: lookup, Protection: tc.server}})
			_, err := Dial(ctx, ClientConfig{Addr: addr, Protocol: testProtocol, SASL: TokenAuth{Token: tok, Protection: tc.client}})
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%v, want an error saying %q", err, tc.says)
			}
			if tc.name != "bad setting" && !errors.Is(err, ErrProtection) {
				t.Fatalf("%v is not ErrProtection", err)
			}
		})
	}
}

// TestTokenProtectionTampering: on a connection at integrity or privacy,
// a wrapped call altered on the way, or a earlier one replayed in its
// place, is refused: the server drops the connection instead of
// answering.
func TestTokenProtectionTampering(t *testing.T) {
	tok := Token{Identifier: []byte("owner=alice,seq=8"), Password: []byte("pw")}
	lookup := func(id []byte) ([]byte, string, error) { return tok.Password, "alice", nil }
	for _, level := range []string{"integrity", "privacy"} {
		addr := startServer(t, ServerConfig{Name: "test", SASL: TokenServer{Lookup: lookup, Protection: level}})
		for _, mode := range []string{"alter", "replay", "none"} {
			t.Run(level+" "+mode, func(t *testing.T) {
				wire := &packetLog{}
				c := dial(t, addr, ClientConfig{Dial: wire.dial, SASL: TokenAuth{Token: tok, Protection: level}})
				if _, err := callFileInfo(c, "/first"); err != nil {
					t.Fatal(err)
				}
				wire.tamper(mode)
				resp, err := callFileInfo(c, "/second")
				if mode == "none" {
					if err != nil || string(resp.GetFs().GetPath()) != "/second" {
						t.Fatalf("untouched call: %v, %v", resp, err)
					}
					return
				}
				if err == nil {
					t.Fatalf("a %s call was answered: path %q", mode, resp.GetFs().GetPath())
				}
			})
		}
	}
}

// packetLog dials connections that record what the client writes and can
// tamper with its next write.
type packetLog struct {
	mu      sync.Mutex
	written bytes.Buffer
	largest int
	last    []byte
	mode    string // the next write: "alter", "replay" (the previous write instead)
	skip    int    // writes to let through before mode applies
}

func (l *packetLog) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &loggedConn{Conn: c, log: l}, nil
}

func (l *packetLog) tamper(mode string) { l.tamperAfter(mode, 0) }

// tamperAfter applies mode to the write after the next skip ones.
func (l *packetLog) tamperAfter(mode string, skip int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mode, l.skip = mode, skip
}

func (l *packetLog) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Contains(l.written.Bytes(), []byte(s))
}

func (l *packetLog) largestWrite() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.largest
}

type loggedConn struct {
	net.Conn
	log *packetLog
}

func (c *loggedConn) Write(p []byte) (int, error) {
	l := c.log
	l.mu.Lock()
	out := append([]byte{}, p...)
	mode := l.mode
	if l.skip > 0 {
		mode = ""
		l.skip--
	}
	switch mode {
	case "alter":
		out[len(out)/2] ^= 0x20
		l.mode = ""
	case "replay":
		out = l.last
		l.mode = ""
	}
	l.last = append([]byte{}, p...)
	l.written.Write(out)
	l.largest = max(l.largest, len(out))
	l.mu.Unlock()
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// BenchmarkDigestLayer wraps and unwraps 64 KiB messages at auth-int and
// with each auth-conf cipher: the cost per byte of each level.
func BenchmarkDigestLayer(b *testing.B) {
	ha1 := md5.Sum([]byte("bench"))
	msg := bytes.Repeat([]byte{7}, 64<<10)
	for _, cipherName := range append([]string{""}, digestCiphers...) {
		name, level := "auth-int", byte(qopIntegrity)
		if cipherName != "" {
			name, level = "auth-conf-"+cipherName, qopPrivacy
		}
		b.Run(name, func(b *testing.B) {
			client := must2(newDigestLayer(ha1, level, cipherName, true))
			server := must2(newDigestLayer(ha1, level, cipherName, false))
			b.SetBytes(int64(len(msg)))
			for i := 0; i < b.N; i++ {
				if _, err := server.unwrap(must(client.wrap(msg))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
