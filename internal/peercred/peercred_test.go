package peercred

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

const token = "0123456789abcdef0123456789abcdef"

func serve(t *testing.T, creds *Credentials) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(creds))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

func check(t *testing.T, addr string, creds *Credentials) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(3*time.Second))
	defer cancel()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

func TestSameTokenConnects(t *testing.T) {
	creds, _ := New(token, "test")
	if err := check(t, serve(t, creds), creds); err != nil {
		t.Fatalf("a client with the token was refused: %v", err)
	}
}

func TestOtherTokenOrPurposeRefused(t *testing.T) {
	server, _ := New(token, "test")
	addr := serve(t, server)
	for name, client := range map[string]*Credentials{
		"other token":   must(New(strings.Repeat("x", 32), "test")),
		"other purpose": must(New(token, "other")),
	} {
		t.Run(name, func(t *testing.T) {
			if err := check(t, addr, client); err == nil {
				t.Fatal("a client without the token's proof reached the service")
			}
		})
	}
}

// A client that speaks gRPC without the handshake reaches nothing.
func TestPlainClientRefused(t *testing.T) {
	server, _ := New(token, "test")
	addr := serve(t, server)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testutil.Scale(5 * time.Second)))
	io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"+strings.Repeat("\x00", 64))
	// The server closes after the bad proof (with a reset, having left
	// the rest of our bytes unread).
	b, err := io.ReadAll(c)
	if len(b) != len(magic)+nonceLen || (err != nil && !errors.Is(err, syscall.ECONNRESET)) {
		t.Fatalf("read %d bytes (%v); want only the %d-byte hello, then the close", len(b), err, len(magic)+nonceLen)
	}
}

// The client side refuses a server that cannot prove it has the token.
func TestClientRefusesImpostor(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	impostor, _ := New(strings.Repeat("y", 32), "test")
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		// Plays the protocol with the wrong token: its proof of the
		// client's nonce cannot verify.
		hello := make([]byte, len(magic)+nonceLen)
		copy(hello, magic)
		c.Write(hello)
		reply := make([]byte, nonceLen+macLen)
		io.ReadFull(c, reply)
		c.Write(impostor.mac("server", reply[:nonceLen], hello[len(magic):]))
		time.Sleep(time.Second)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	creds, _ := New(token, "test")
	_, _, err = creds.ClientHandshake(context.Background(), "impostor", c)
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("got %v, want ErrRefused", err)
	}
}

func TestShortTokenRejected(t *testing.T) {
	if _, err := New("short", "test"); err == nil {
		t.Fatal("a 5-byte token was accepted")
	}
}

func must(c *Credentials, err error) *Credentials {
	if err != nil {
		panic(err)
	}
	return c
}
