package hadooprpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/testaddr"
	"github.com/spindle-ml/spindle/internal/testutil"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
)

func TestMain(m *testing.M) {
	// gokrb5's service side keeps one replay cache per process, swept by a
	// goroutine it never stops.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/jcmturner/gokrb5/v8/service.GetReplayCache.func1.1"),
		// The same goroutine, as the race detector's build names it.
		goleak.IgnoreAnyFunction("github.com/jcmturner/gokrb5/v8/service.VerifyAPREQ.GetReplayCache.func1.1"))
}

const testProtocol = "org.example.TestProtocol"

// echoService answers getFileInfo with a status whose owner is the caller
// and whose path is the request's, and fails for paths starting with /err.
func echoService() *Service {
	svc := NewService(testProtocol)
	Handle(svc, "getFileInfo", func(ctx context.Context, req *hadooppb.GetFileInfoRequestProto) (*hadooppb.GetFileInfoResponseProto, error) {
		c, _ := CallerFromContext(ctx)
		switch {
		case strings.HasPrefix(req.GetSrc(), "/err"):
			return nil, fmt.Errorf("look up %s: %w", req.GetSrc(), Errorf("java.io.FileNotFoundException", "no such file"))
		case strings.HasPrefix(req.GetSrc(), "/plain"):
			return nil, errors.New("plain failure")
		case strings.HasPrefix(req.GetSrc(), "/slow"):
			time.Sleep(20 * time.Millisecond)
		}
		return &hadooppb.GetFileInfoResponseProto{Fs: &hadooppb.HdfsFileStatusProto{
			FileType:         hadooppb.HdfsFileStatusProto_IS_FILE.Enum(),
			Path:             []byte(req.GetSrc()),
			Length:           proto.Uint64(0),
			Permission:       &hadooppb.FsPermissionProto{Perm: proto.Uint32(0o644)},
			Owner:            proto.String(c.User),
			Group:            proto.String(c.RealUser),
			Symlink:          []byte(c.Protection),
			ModificationTime: proto.Uint64(0),
			AccessTime:       proto.Uint64(0),
		}}, nil
	})
	return svc
}

func startServer(t *testing.T, cfg ServerConfig) string {
	t.Helper()
	return startServerWith(t, cfg, echoService())
}

func startServerWith(t *testing.T, cfg ServerConfig, svcs ...*Service) string {
	t.Helper()
	srv, err := NewServer(cfg, svcs...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

func dial(t *testing.T, addr string, cfg ClientConfig) *Client {
	t.Helper()
	cfg.Addr = addr
	if cfg.Protocol == "" {
		cfg.Protocol = testProtocol
	}
	if cfg.User == "" {
		cfg.User = "alice"
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(5*time.Second))
	defer cancel()
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func callFileInfo(c *Client, src string) (*hadooppb.GetFileInfoResponseProto, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(5*time.Second))
	defer cancel()
	resp := &hadooppb.GetFileInfoResponseProto{}
	err := c.Call(ctx, "getFileInfo", &hadooppb.GetFileInfoRequestProto{Src: proto.String(src)}, resp)
	return resp, err
}

func TestCalls(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	addr := startServer(t, ServerConfig{Name: "test", OnCall: func(_, m string, _ error) {
		mu.Lock()
		seen[m]++
		mu.Unlock()
	}})
	c := dial(t, addr, ClientConfig{User: "alice"})

	for _, tc := range []struct {
		name, src string
		class     string // expected exception class; empty for success
		message   string
	}{
		{"success", "/a/b", "", ""},
		{"remote error keeps class and context", "/err/x", "java.io.FileNotFoundException", "look up /err/x"},
		{"plain error is an IOException", "/plain", ClassIOException, "plain failure"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := callFileInfo(c, tc.src)
			if tc.class == "" {
				if err != nil {
					t.Fatal(err)
				}
				if string(resp.GetFs().GetPath()) != tc.src || resp.GetFs().GetOwner() != "alice" {
					t.Fatalf("response %v", resp)
				}
				return
			}
			var re *RemoteError
			if !errors.As(err, &re) || re.Class != tc.class || !strings.Contains(re.Message, tc.message) || re.Method != "getFileInfo" {
				t.Fatalf("error %v, want class %s with %q", err, tc.class, tc.message)
			}
		})
	}

	t.Run("unknown method and protocol leave the connection usable", func(t *testing.T) {
		ctx := context.Background()
		err := c.Call(ctx, "nope", &hadooppb.GetFileInfoRequestProto{Src: proto.String("/")}, &hadooppb.GetFileInfoResponseProto{})
		if ExceptionClass(err) != ClassNoSuchMethod {
			t.Fatalf("unknown method: %v", err)
		}
		other := dial(t, addr, ClientConfig{Protocol: "org.example.Other"})
		if _, err := callFileInfo(other, "/"); ExceptionClass(err) != ClassNoSuchProtocol {
			t.Fatalf("unknown protocol: %v", err)
		}
		if _, err := callFileInfo(c, "/still/works"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("concurrent calls match their responses", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				src := fmt.Sprintf("/slow/%d", i)
				if i%2 == 0 {
					src = fmt.Sprintf("/fast/%d", i)
				}
				resp, err := callFileInfo(c, src)
				if err == nil && string(resp.GetFs().GetPath()) != src {
					err = fmt.Errorf("asked %s, got %s", src, resp.GetFs().GetPath())
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("cancelled call", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := c.Call(ctx, "getFileInfo", &hadooppb.GetFileInfoRequestProto{Src: proto.String("/slow")}, &hadooppb.GetFileInfoResponseProto{})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled call: %v", err)
		}
		if _, err := callFileInfo(c, "/after-cancel"); err != nil {
			t.Fatal(err)
		}
	})

	mu.Lock()
	defer mu.Unlock()
	if seen["getFileInfo"] < 25 {
		t.Fatalf("OnCall saw %v", seen)
	}
}

// rawConn opens a connection and returns it with a reader of response packets.
func rawConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(testutil.Scale(5 * time.Second)))
	t.Cleanup(func() { c.Close() })
	return c
}

func readFatal(t *testing.T, c net.Conn) *hadooppb.RpcResponseHeaderProto {
	t.Helper()
	body, err := readPacket(c, DefaultMaxPacketSize)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	var h hadooppb.RpcResponseHeaderProto
	if _, err := unmarshalNext(body, &h); err != nil {
		t.Fatal(err)
	}
	if h.GetStatus() != hadooppb.RpcResponseHeaderProto_FATAL {
		t.Fatalf("status %v, want FATAL", h.GetStatus())
	}
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("connection not closed after a fatal error: %v", err)
	}
	return &h
}

func TestBadConnections(t *testing.T) {
	addr := startServer(t, ServerConfig{Name: "test"})

	t.Run("wrong version", func(t *testing.T) {
		c := rawConn(t, addr)
		c.Write(header{version: 7}.bytes())
		h := readFatal(t, c)
		if h.GetErrorDetail() != hadooppb.RpcResponseHeaderProto_FATAL_VERSION_MISMATCH {
			t.Fatalf("error detail %v", h.GetErrorDetail())
		}
	})

	t.Run("sasl without a mechanism", func(t *testing.T) {
		c := rawConn(t, addr)
		c.Write(header{version: Version, auth: AuthSASL}.bytes())
		h := readFatal(t, c)
		if h.GetExceptionClassName() != ClassAccessControl || !strings.Contains(h.GetErrorMsg(), "SASL") {
			t.Fatalf("response %v", h)
		}
	})

	t.Run("no user", func(t *testing.T) {
		c := rawConn(t, addr)
		c.Write(header{version: Version}.bytes())
		pkt, _ := marshalPacket(requestHeader(CallIDConnectionContext, []byte("id")), &hadooppb.IpcConnectionContextProto{})
		c.Write(pkt)
		h := readFatal(t, c)
		if h.GetErrorDetail() != hadooppb.RpcResponseHeaderProto_FATAL_UNAUTHORIZED {
			t.Fatalf("response %v", h)
		}
	})

	t.Run("not hadoop", func(t *testing.T) {
		c := rawConn(t, addr)
		c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
		// The server hangs up (with a reset, as the request went unread).
		if n, err := c.Read(make([]byte, 1)); n > 0 || err == nil {
			t.Fatalf("server answered garbage: %d bytes, %v", n, err)
		}
	})

	t.Run("pings get no answer", func(t *testing.T) {
		c := dial(t, addr, ClientConfig{})
		pkt, _ := marshalPacket(requestHeader(CallIDPing, c.cfg.ClientID))
		c.conn.Write(pkt)
		if _, err := callFileInfo(c, "/after-ping"); err != nil {
			t.Fatal(err)
		}
	})
}

// tokenSASL is a toy mechanism: the server challenges, the client answers
// with its name and a shared token.
type tokenSASL struct{ token string }

func (s tokenSASL) Negotiate(ctx context.Context, ex *SASLExchange) (string, error) {
	m, err := ex.Recv()
	if err != nil || m.GetState() != hadooppb.RpcSaslProto_NEGOTIATE {
		return "", fmt.Errorf("want NEGOTIATE: %v %v", m, err)
	}
	ex.Send(&hadooppb.RpcSaslProto{State: hadooppb.RpcSaslProto_CHALLENGE.Enum(), Token: []byte("who?")})
	m, err = ex.Recv()
	if err != nil {
		return "", err
	}
	user, tok, _ := strings.Cut(string(m.GetToken()), ":")
	if tok != s.token {
		return "", errors.New("bad token")
	}
	return user, ex.Send(&hadooppb.RpcSaslProto{State: hadooppb.RpcSaslProto_SUCCESS.Enum()})
}

type tokenClient struct{ user, token string }

func (c tokenClient) Negotiate(ctx context.Context, ex *SASLExchange) error {
	ex.Send(&hadooppb.RpcSaslProto{State: hadooppb.RpcSaslProto_NEGOTIATE.Enum()})
	if _, err := ex.Recv(); err != nil {
		return err
	}
	ex.Send(&hadooppb.RpcSaslProto{State: hadooppb.RpcSaslProto_RESPONSE.Enum(), Token: []byte(c.user + ":" + c.token)})
	m, err := ex.Recv()
	if err != nil {
		return err
	}
	if m.GetState() != hadooppb.RpcSaslProto_SUCCESS {
		return fmt.Errorf("state %v", m.GetState())
	}
	return nil
}

func TestSASLSeam(t *testing.T) {
	addr := startServer(t, ServerConfig{Name: "test", SASL: tokenSASL{token: "s3cret"}})
	c := dial(t, addr, ClientConfig{User: "proxied", SASL: tokenClient{user: "svc", token: "s3cret"}})
	resp, err := callFileInfo(c, "/x")
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetFs().GetOwner() != "proxied" || resp.GetFs().GetGroup() != "svc" {
		t.Fatalf("effective %q real %q, want proxied and svc", resp.GetFs().GetOwner(), resp.GetFs().GetGroup())
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(5*time.Second))
	defer cancel()
	_, err = Dial(ctx, ClientConfig{Addr: addr, User: "x", Protocol: testProtocol, SASL: tokenClient{user: "svc", token: "wrong"}})
	if ExceptionClass(err) != ClassAccessControl {
		t.Fatalf("wrong token: %v", err)
	}
}

func TestDialErrors(t *testing.T) {
	addr := testaddr.Refusing(t)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(5*time.Second))
	defer cancel()
	_, err := Dial(ctx, ClientConfig{Addr: addr, User: "u", Protocol: testProtocol})
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("dial a closed port: %v", err)
	}
	if _, err := Dial(ctx, ClientConfig{Addr: addr}); err == nil {
		t.Fatal("dial without a user succeeded")
	}
}
