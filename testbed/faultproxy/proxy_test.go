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

// serve starts p until the test ends.
func serve(t *testing.T, p *Proxy) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

func TestOneWay(t *testing.T) {
	// The target greets each client and passes on the lines it hears.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	heard := make(chan string, 10)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
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
				c.Write([]byte("hi\n"))
				r := bufio.NewReader(c)
				for {
					s, err := r.ReadString('\n')
					if err != nil {
						return
					}
					heard <- s
				}
			}()
		}
	}()
	p, err := New("127.0.0.1:0", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	serve(t, p)
	p.SetToTarget(Blackhole)
	c := dial(t, p)
	if got, err := c.read(5 * time.Second); err != nil || got != "hi\n" {
		t.Fatalf("the target's greeting through a one-way partition: %q, %v; want it passed", got, err)
	}
	c.c.Write([]byte("lost\n"))
	select {
	case s := <-heard:
		t.Fatalf("the target heard %q through the partition", s)
	case <-time.After(300 * time.Millisecond): // silence is what is checked
	}
	p.SetToTarget(Pass)
	if _, err := c.read(5 * time.Second); err == nil || timedOut(err) {
		t.Fatalf("the partitioned connection was not cut at the end: %v", err)
	}
	d := dial(t, p)
	d.read(5 * time.Second)
	d.c.Write([]byte("again\n"))
	if s := <-heard; s != "again\n" {
		t.Fatalf("after the partition the target heard %q", s)
	}
}

// TestDelayAndLoss: a delayed or lossy link still carries every byte, no
// sooner than the fault allows.
func TestDelayAndLoss(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(p *Proxy)
		min  time.Duration
	}{
		{"delay", func(p *Proxy) { p.SetDelay(150 * time.Millisecond) }, 300 * time.Millisecond},
		{"loss", func(p *Proxy) { p.SetLoss(1, 7) }, 2 * LossRTO},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := start(t)
			c := dial(t, p)
			c.roundTrip("warm", 5*time.Second)
			tc.set(p)
			start := time.Now()
			if got, err := c.roundTrip("slow", 10*time.Second); err != nil || got != "slow\n" {
				t.Fatalf("got %q, %v", got, err)
			}
			// A lower bound only: the fault holds the bytes at least this long.
			if took := time.Since(start); took < tc.min {
				t.Fatalf("round trip took %s, want at least %s", took, tc.min)
			}
		})
	}
}
