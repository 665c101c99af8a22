package hadooprpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/testaddr"
	"github.com/spindle-ml/spindle/internal/testutil"
	"google.golang.org/protobuf/proto"
)

// TestDigestRFC2831 checks the response arithmetic against the worked
// example of RFC 2831 section 4.
func TestDigestRFC2831(t *testing.T) {
	d := digest{
		user: "chris", realm: "elwood.innosoft.com", password: "secret",
		nonce: "OA6MG9tEQGm2hh", cnonce: "OA6MHXh6VqTrRk", nc: "00000001", qop: "auth",
		uri: "imap/elwood.innosoft.com",
	}
	if got, want := d.response("AUTHENTICATE"), "d388dad90d4bbd760a152321f2143af7"; got != want {
		t.Errorf("response %s, want %s", got, want)
	}
	if got, want := d.response(""), "ea40f60335c427b5527b84dbabcdfffd"; got != want {
		t.Errorf("rspauth %s, want %s", got, want)
	}
}

func TestParseDigest(t *testing.T) {
	m, err := parseDigest(`realm="default",nonce="a\"b,c",qop="auth",charset=utf-8,algorithm=md5-sess`)
	if err != nil {
		t.Fatal(err)
	}
	if m["realm"] != "default" || m["nonce"] != `a"b,c` || m["charset"] != "utf-8" || m["algorithm"] != "md5-sess" {
		t.Fatalf("parsed %v", m)
	}
	if _, err := parseDigest(`nonce="open`); err == nil {
		t.Fatal("unterminated quote parsed")
	}
}

// TestTokenAuth runs TOKEN (DIGEST-MD5) authentication between this
// package's client and server.
func TestTokenAuth(t *testing.T) {
	good := Token{Identifier: []byte("appattempt_1_0001_000001"), Password: []byte("pw-of-the-attempt"), Kind: "YARN_AM_RM_TOKEN", Service: "rm"}
	lookup := func(id []byte) ([]byte, string, error) {
		switch string(id) {
		case string(good.Identifier):
			return good.Password, "appattempt_1_0001_000001", nil
		case "expired":
			return nil, "", errors.New("token expired")
		}
		return nil, "", fmt.Errorf("unknown token %q", id)
	}
	addr := startServer(t, ServerConfig{Name: "test", SASL: TokenServer{Lookup: lookup, AllowSimple: true}})

	t.Run("good token authenticates its user", func(t *testing.T) {
		c := dial(t, addr, ClientConfig{User: "ignored", SASL: TokenAuth{Token: good}})
		resp, err := callFileInfo(c, "/x")
		if err != nil {
			t.Fatal(err)
		}
		// The token's user is both real and effective user: the client
		// names no user of its own beside a token.
		if got := resp.GetFs().GetGroup(); got != "appattempt_1_0001_000001" || resp.GetFs().GetOwner() != got {
			t.Fatalf("authenticated user %q, effective %q", got, resp.GetFs().GetOwner())
		}
	})
	t.Run("simple still allowed when the server says so", func(t *testing.T) {
		c := dial(t, addr, ClientConfig{User: "bob"})
		resp, err := callFileInfo(c, "/x")
		if err != nil || resp.GetFs().GetOwner() != "bob" {
			t.Fatalf("simple: %v %v", resp, err)
		}
	})
	for _, tc := range []struct {
		name string
		tok  Token
		want string
	}{
		{"wrong password", Token{Identifier: good.Identifier, Password: []byte("guess")}, "does not match"},
		{"expired token", Token{Identifier: []byte("expired"), Password: []byte("x")}, "token expired"},
		{"unknown token", Token{Identifier: []byte("nobody"), Password: []byte("x")}, "unknown token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(5*time.Second))
			defer cancel()
			_, err := Dial(ctx, ClientConfig{Addr: addr, User: "u", Protocol: testProtocol, SASL: TokenAuth{Token: tc.tok}})
			if ExceptionClass(err) != ClassAccessControl || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("dial: %v, want AccessControlException with %q", err, tc.want)
			}
		})
	}
	t.Run("token refused where only simple is served", func(t *testing.T) {
		plain := startServer(t, ServerConfig{Name: "plain"})
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(5*time.Second))
		defer cancel()
		if _, err := Dial(ctx, ClientConfig{Addr: plain, User: "u", Protocol: testProtocol, SASL: TokenAuth{Token: good}}); err == nil {
			t.Fatal("token auth against a simple-only server succeeded")
		}
	})
}

func TestCredentialsRoundTrip(t *testing.T) {
	c := NewCredentials()
	c.Tokens["amrm"] = Token{Identifier: bytes.Repeat([]byte{0xab}, 300), Password: []byte("pw"), Kind: "YARN_AM_RM_TOKEN", Service: "127.0.0.1:8030"}
	c.Tokens["hdfs"] = Token{Identifier: []byte("id"), Password: []byte("p2"), Kind: "HDFS_DELEGATION_TOKEN", Service: "ha-hdfs:ns"}
	c.Secrets["spindle.secret"] = []byte("s3cret")
	for _, v := range []byte{CredentialsWritable, CredentialsProtobuf} {
		t.Run(fmt.Sprintf("version %d", v), func(t *testing.T) {
			b, err := c.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ReadCredentials(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			tok, ok := got.TokenOfKind("YARN_AM_RM_TOKEN")
			if !ok || !bytes.Equal(tok.Identifier, c.Tokens["amrm"].Identifier) || tok.Service != "127.0.0.1:8030" {
				t.Fatalf("amrm token %v %v", tok, ok)
			}
			if len(got.Tokens) != 2 || string(got.Secrets["spindle.secret"]) != "s3cret" {
				t.Fatalf("read back %+v", got)
			}
		})
	}
	t.Run("hand-made version 0 bytes", func(t *testing.T) {
		// One token (alias "a", identifier 1 byte, password 1 byte, kind
		// "K", service "S"), no secrets, as Hadoop's Writables lay it out.
		raw := []byte("HDTS\x00\x01\x01a\x01\x07\x01\x08\x01K\x01S\x00")
		got, err := ReadCredentials(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if tok := got.Tokens["a"]; tok.Kind != "K" || tok.Service != "S" || tok.Identifier[0] != 7 || tok.Password[0] != 8 {
			t.Fatalf("token %+v", tok)
		}
	})
	for _, bad := range [][]byte{[]byte("HDT"), []byte("XXXX\x00"), []byte("HDTS\x07"), []byte("HDTS\x00\x05")} {
		if _, err := ReadCredentials(bytes.NewReader(bad)); !errors.Is(err, ErrCredentials) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestVInt(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 127, -112, 128, -113, 255, 256, 1 << 20, -(1 << 20), 1<<62 + 5, -1 << 62} {
		b := appendVInt(nil, v)
		got, err := readVInt(bytes.NewReader(b))
		if err != nil || got != v {
			t.Errorf("%d: encoded %x, read %d %v", v, b, got, err)
		}
	}
	// Hadoop encodes 300 as 0x8e 0x01 0x2c.
	if b := appendVInt(nil, 300); !bytes.Equal(b, []byte{0x8e, 0x01, 0x2c}) {
		t.Errorf("300 encoded %x", b)
	}
}

// TestFailover calls through a standby, a dead address and an active
// server.
func TestFailover(t *testing.T) {
	standby := NewService(testProtocol)
	Handle(standby, "getFileInfo", func(ctx context.Context, req *hadooppb.GetFileInfoRequestProto) (*hadooppb.GetFileInfoResponseProto, error) {
		return nil, Errorf(ClassStandby, "Operation category READ is not supported in state standby")
	})
	sb := startServerWith(t, ServerConfig{Name: "standby"}, standby)
	active := startServer(t, ServerConfig{Name: "active"})
	dead := testaddr.Refusing(t)

	f, err := NewFailoverClient(FailoverConfig{Addrs: []string{dead, sb, active}, Client: ClientConfig{User: "u", Protocol: testProtocol}, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	resp := &hadooppb.GetFileInfoResponseProto{}
	if err := f.Call(ctx, "getFileInfo", &hadooppb.GetFileInfoRequestProto{Src: proto.String("/a")}, resp); err != nil {
		t.Fatal(err)
	}
	if f.Current() != active {
		t.Fatalf("current %s, want the active %s", f.Current(), active)
	}
	// A remote error that is not a standby is the answer, not a failover.
	err = f.Call(ctx, "getFileInfo", &hadooppb.GetFileInfoRequestProto{Src: proto.String("/err/x")}, resp)
	if ExceptionClass(err) != "java.io.FileNotFoundException" || f.Current() != active {
		t.Fatalf("error %v on %s", err, f.Current())
	}

	none, _ := NewFailoverClient(FailoverConfig{Addrs: []string{dead, sb}, Client: ClientConfig{User: "u", Protocol: testProtocol}, Rounds: 2, Backoff: time.Millisecond})
	defer none.Close()
	err = none.Call(ctx, "getFileInfo", &hadooppb.GetFileInfoRequestProto{Src: proto.String("/a")}, resp)
	if !errors.Is(err, ErrNoServer) || !strings.Contains(err.Error(), dead) || !strings.Contains(err.Error(), sb) {
		t.Fatalf("no active server: %v", err)
	}
}
