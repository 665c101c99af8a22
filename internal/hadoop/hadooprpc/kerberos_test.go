package hadooprpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	etypeID "github.com/jcmturner/gokrb5/v8/iana/etypeID"
	"github.com/jcmturner/gokrb5/v8/types"

	"github.com/spindle-ml/spindle/internal/hadoop/kerberos"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/krbtest"
)

// TestKerberos runs SASL GSSAPI between Spindle's client and server with
// tickets from a real MIT KDC: a user logged in with a keytab, and one
// with a ticket cache kinit filled, are both authenticated as themselves.
func TestKerberos(t *testing.T) {
	kdc := krbtest.Start(t)
	t.Setenv("KRB5_CONFIG", kdc.Conf)
	serverKT := kdc.AddServiceKeytab("rm/127.0.0.1")
	aliceKT := kdc.AddPrincipal("alice")
	bobKT := kdc.AddPrincipal("bob")
	addr := startServer(t, ServerConfig{Name: "test", SASL: KerberosServer{Keytab: serverKT, Protocol: "rm", ServerID: "127.0.0.1"}})

	login := func(o kerberos.Options) *KerberosAuth {
		t.Helper()
		cl, err := kerberos.Login(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Destroy)
		return &KerberosAuth{Client: cl, Principal: "rm/_HOST@" + krbtest.Realm, Host: "127.0.0.1"}
	}
	for name, auth := range map[string]*KerberosAuth{
		"keytab":       login(kerberos.Options{Principal: "alice", Keytab: aliceKT}),
		"ticket cache": login(kerberos.Options{CCache: kdc.Kinit("bob", bobKT)}),
	} {
		t.Run(name, func(t *testing.T) {
			want := map[string]string{"keytab": "alice", "ticket cache": "bob"}[name]
			c := dial(t, addr, ClientConfig{User: want, SASL: *auth})
			resp, err := callFileInfo(c, "/x")
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetFs().GetGroup() != want {
				t.Fatalf("the server authenticated %q, want %q", resp.GetFs().GetGroup(), want)
			}
		})
	}

	t.Run("another server's principal", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
		defer cancel()
		kdc.AddPrincipal("nn/127.0.0.1")
		auth := login(kerberos.Options{Principal: "alice", Keytab: aliceKT})
		auth.Principal = "nn/_HOST@" + krbtest.Realm
		_, err := Dial(ctx, ClientConfig{Addr: addr, User: "alice", Protocol: testProtocol, SASL: *auth})
		if ExceptionClass(err) != ClassAccessControl {
			t.Fatalf("a ticket for another principal: %v, want refused", err)
		}
	})
	t.Run("privacy required", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
		defer cancel()
		strict := startServer(t, ServerConfig{Name: "test", SASL: KerberosServer{Keytab: serverKT, Protocol: "rm", ServerID: "127.0.0.1", Protection: "privacy"}})
		_, err := Dial(ctx, ClientConfig{Addr: strict, User: "alice", Protocol: testProtocol, SASL: *login(kerberos.Options{Principal: "alice", Keytab: aliceKT})})
		if !errors.Is(err, ErrProtection) || !strings.Contains(err.Error(), "requires hadoop.rpc.protection privacy") || !strings.Contains(err.Error(), "configured for authentication") {
			t.Fatalf("a server that requires privacy, a client configured for authentication: %v", err)
		}
	})
}

// recordingDial dials and keeps every byte the client sends and receives.
func recordingDial(wire *syncBuffer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &recordedConn{Conn: c, wire: wire}, nil
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Write(p)
}

func (s *syncBuffer) Contains(x string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Contains(s.b.Bytes(), []byte(x))
}

type recordedConn struct {
	net.Conn
	wire *syncBuffer
}

func (c *recordedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.wire.Write(p[:n])
	return n, err
}

func (c *recordedConn) Write(p []byte) (int, error) {
	c.wire.Write(p)
	return c.Conn.Write(p)
}

// TestKerberosProtection runs calls at each level of hadoop.rpc.protection
// between Spindle's client and server with tickets from a real MIT KDC:
// the server sees the level negotiated, calls larger than one wrap token
// go through, and what crosses the wire is readable at authentication and
// integrity and not at privacy. Ends that share no level refuse each
// other, saying which levels each has.
func TestKerberosProtection(t *testing.T) {
	kdc := krbtest.Start(t)
	t.Setenv("KRB5_CONFIG", kdc.Conf)
	serverKT := kdc.AddServiceKeytab("nn/127.0.0.1")
	cl, err := kerberos.Login(kerberos.Options{Principal: "alice", Keytab: kdc.AddPrincipal("alice")})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Destroy()
	secret := "a-path-nobody-may-read-" + strings.Repeat("x", 200<<10)
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
			addr := startServer(t, ServerConfig{Name: "test", SASL: KerberosServer{Keytab: serverKT, Protocol: "nn", ServerID: "127.0.0.1", Protection: tc.server}})
			var wire syncBuffer
			c := dial(t, addr, ClientConfig{User: "alice", Dial: recordingDial(&wire),
				SASL: KerberosAuth{Client: cl, Principal: "nn/_HOST@" + krbtest.Realm, Protection: tc.client}})
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
			if got := wire.Contains("a-path-nobody-may-read"); got != tc.readable {
				t.Fatalf("the request readable on the wire: %v, want %v", got, tc.readable)
			}
		})
	}
	for _, tc := range []struct{ name, server, client, says string }{
		{"integrity required, privacy configured", "integrity", "privacy", "requires hadoop.rpc.protection integrity"},
		{"authentication only, privacy configured", "authentication", "privacy", "configured for privacy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
			defer cancel()
			addr := startServer(t, ServerConfig{Name: "test", SASL: KerberosServer{Keytab: serverKT, Protocol: "nn", ServerID: "127.0.0.1", Protection: tc.server}})
			_, err := Dial(ctx, ClientConfig{Addr: addr, User: "alice", Protocol: testProtocol,
				SASL: KerberosAuth{Client: cl, Principal: "nn/_HOST@" + krbtest.Realm, Protection: tc.client}})
			if !errors.Is(err, ErrProtection) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%v, want ErrProtection saying %q", err, tc.says)
			}
		})
	}
	t.Run("bad setting", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
		defer cancel()
		addr := startServer(t, ServerConfig{Name: "test", SASL: KerberosServer{Keytab: serverKT, Protocol: "nn", ServerID: "127.0.0.1"}})
		_, err := Dial(ctx, ClientConfig{Addr: addr, User: "alice", Protocol: testProtocol,
			SASL: KerberosAuth{Client: cl, Principal: "nn/_HOST@" + krbtest.Realm, Protection: "secret"}})
		if err == nil || !strings.Contains(err.Error(), `"secret" is not authentication, integrity or privacy`) {
			t.Fatalf("%v", err)
		}
	})
}

// TestWrapTokens: a wrap token altered, replayed, or sent by the wrong end
// is refused, at integrity and at privacy.
func TestWrapTokens(t *testing.T) {
	key := types.EncryptionKey{KeyType: etypeID.AES256_CTS_HMAC_SHA1_96, KeyValue: bytes.Repeat([]byte{7}, 32)}
	for _, privacy := range []bool{false, true} {
		t.Run(fmt.Sprintf("privacy=%v", privacy), func(t *testing.T) {
			client := &gssLayer{key: key, privacy: privacy}
			server := &gssLayer{key: key, acceptor: true, privacy: privacy}
			first, err := client.wrap([]byte("first message"))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := server.unwrap(first); err != nil || string(got) != "first message" {
				t.Fatalf("unwrap: %q, %v", got, err)
			}
			second, _ := client.wrap([]byte("second message"))
			for name, tok := range map[string][]byte{
				"altered":   append(append([]byte{}, second[:len(second)-1]...), second[len(second)-1]^1),
				"replayed":  first,
				"wrong end": must(server.wrap([]byte("x"))),
				"truncated": second[:10],
			} {
				if _, err := server.unwrap(tok); err == nil {
					t.Errorf("%s token accepted", name)
				}
			}
			if got, err := server.unwrap(second); err != nil || string(got) != "second message" {
				t.Fatalf("unwrap after refusals: %q, %v", got, err)
			}
		})
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestKerberosLoginErrors(t *testing.T) {
	kdc := krbtest.Start(t)
	kt := kdc.AddPrincipal("alice")
	for name, tc := range map[string]struct {
		o    kerberos.Options
		want string
	}{
		"keytab without principal": {kerberos.Options{Conf: kdc.Conf, Keytab: kt}, "without its principal"},
		"principal without keytab": {kerberos.Options{Conf: kdc.Conf, Principal: "alice"}, "without its keytab"},
		"no ticket":                {kerberos.Options{Conf: kdc.Conf, CCache: kdc.Dir + "/no-such-cache"}, "kinit"},
		"wrong realm":              {kerberos.Options{Conf: kdc.Conf, Principal: "alice@NOT.THIS.REALM", Keytab: kt}, "NOT.THIS.REALM"},
		"missing krb5.conf":        {kerberos.Options{Conf: kdc.Dir + "/nope.conf"}, "nope.conf"},
	} {
		t.Run(name, func(t *testing.T) {
			cl, err := kerberos.Login(tc.o)
			if err == nil {
				cl.Destroy()
				t.Fatal("logged in")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}
