package faultproxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo runs a line echo server on loopback until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func start(t *testing.T) *Proxy {
	t.Helper()
	p, err := New("127.0.0.1:0", echo(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return p
}

type client struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, p *Proxy) *client {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{c: c, r: bufio.NewReader(c)}
}

// roundTrip sends a line and reads the reply within wait.
func (c *client) roundTrip(line string, wait time.Duration) (string, error) {
	if _, err := c.c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	return c.read(wait)
}

func (c *client) read(wait time.Duration) (string, error) {
	_ = c.c.SetReadDeadline(time.Now().Add(wait))
	s, err := c.r.ReadString('\n')
	return s, err
}

func timedOut(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

func TestModes(t *testing.T) {
	const quiet = 300 * time.Millisecond // how long silence is waited for
	t.Run("pass", func(t *testing.T) {
		p := start(t)
		c := dial(t, p)
		if got, err := c.roundTrip("hello", 5*time.Second); err != nil || got != "hello\n" {
			t.Fatalf("got %q, %v", got, err)
		}
	})
	t.Run("pause holds bytes until pass", func(t *testing.T) {
		p := start(t)
		c := dial(t, p)
		c.roundTrip("warm", 5*time.Second)
		p.Set(Pause)
		if _, err := c.roundTrip("held", quiet); !timedOut(err) {
			t.Fatalf("a paused link answered: %v", err)
		}
		p.Set(Pass)
		if got, err := c.read(5 * time.Second); err != nil || got != "held\n" {
			t.Fatalf("after the pause got %q, %v; want the held line", got, err)
		}
	})
	t.Run("blackhole loses bytes and cuts on leaving", func(t *testing.T) {
		p := start(t)
		c := dial(t, p)
		c.roundTrip("warm", 5*time.Second)
		p.Set(Blackhole)
		if _, err := c.roundTrip("lost", quiet); !timedOut(err) {
			t.Fatalf("a blackholed link answered: %v", err)
		}
		p.Set(Pass)
		if got, err := c.read(5 * time.Second); err == nil || timedOut(err) {
			t.Fatalf("the blackholed connection was not cut: got %q, %v", got, err)
		}
		if got, err := dial(t, p).roundTrip("again", 5*time.Second); err != nil || got != "again\n" {
			t.Fatalf("a new connection after the blackhole: %q, %v", got, err)
		}
	})
	t.Run("drop cuts and refuses", func(t *testing.T) {
		p := start(t)
		c := dial(t, p)
		c.roundTrip("warm", 5*time.Second)
		p.Set(Drop)
		if _, err := c.read(5 * time.Second); err == nil || timedOut(err) {
			t.Fatalf("a dropped connection stayed: %v", err)
		}
		if _, err := dial(t, p).roundTrip("x", 5*time.Second); err == nil || timedOut(err) {
			t.Fatalf("a new connection during drop was served: %v", err)
		}
		p.Set(Pass)
		if got, err := dial(t, p).roundTrip("back", 5*time.Second); err != nil || got != "back\n" {
			t.Fatalf("after drop: %q, %v", got, err)
		}
	})
}
