package main

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// forceStop closes on a second interrupt. The first interrupt (Ctrl-C or
// SIGTERM) cancels the command's context, which stops a job gracefully:
// training processes get their grace period. The second says not to wait.
var forceStop <-chan struct{}

// interruptContext returns a context cancelled by the first SIGINT or
// SIGTERM, a channel closed by the second, and a function that stops
// listening for them.
func interruptContext() (context.Context, <-chan struct{}, func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	force := make(chan struct{})
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-sigs:
			cancel()
		case <-done:
			return
		}
		select {
		case <-sigs:
			close(force)
		case <-done:
		}
	}()
	var once sync.Once
	return ctx, force, func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
			wg.Wait()
			cancel()
		})
	}
}
