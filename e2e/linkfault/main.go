// Command linkfault runs a training command with its links to the other
// ranks through fault proxies (testbed/faultproxy), for the chaos
// harness's network faults between training processes:
//
//	linkfault PROGRAM ARGS...
//
// It starts one proxy in front of every other rank's peer address, gives
// PROGRAM the proxies' addresses in SPINDLE_PEERS (its own address, and
// the listener SPINDLE_PEER_LISTEN_FD passes, unchanged), and every 20 ms
// reads the file $SPINDLE_LINKFAULT_DIR/rank-<RANK> for the faults to put
// on its links, one line per link:
//
//	<peer rank> both|to|from pass|pause|blackhole|drop
//	<peer rank> delay <duration>
//	<peer rank> loss <probability>
//
// "to" is the bytes this rank sends to the peer over the connections it
// dials, "from" the bytes it gets back over them. A missing or empty file
// makes every link pass. It forwards SIGTERM and SIGINT to PROGRAM and
// exits with its status.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spindle-ml/spindle/internal/envcontract"
	"github.com/spindle-ml/spindle/testbed/faultproxy"
)

func main() {
	code, err := run()
	if err != nil {
		fmt.Fprintf(os.Stderr, "linkfault: %v\n", err)
		os.Exit(2)
	}
	os.Exit(code)
}

func run() (int, error) {
	if len(os.Args) < 2 {
		return 0, errors.New("usage: linkfault PROGRAM ARGS")
	}
	rank, err := strconv.Atoi(os.Getenv(envcontract.Rank))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", envcontract.Rank, err)
	}
	peers := strings.Split(os.Getenv(envcontract.Peers), ",")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	proxies := map[int]*faultproxy.Proxy{}
	served := make(chan error, len(peers))
	seen := append([]string(nil), peers...)
	for p, addr := range peers {
		if p == rank || addr == "" {
			continue
		}
		px, err := faultproxy.New("127.0.0.1:0", addr)
		if err != nil {
			return 0, err
		}
		proxies[p] = px
		seen[p] = px.Addr()
		go func() { served <- px.Serve(ctx) }()
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), envcontract.Peers+"="+strings.Join(seen, ","))
	if v := os.Getenv(envcontract.PeerListenFD); v != "" {
		fd, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", envcontract.PeerListenFD, err)
		}
		cmd.ExtraFiles = []*os.File{os.NewFile(uintptr(fd), "peer listener")}
		cmd.Env = append(cmd.Env, envcontract.PeerListenFD+"=3")
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	file := filepath.Join(os.Getenv("SPINDLE_LINKFAULT_DIR"), fmt.Sprintf("rank-%d", rank))
	applied := ""
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case s := <-sigs:
			cmd.Process.Signal(s)
		case <-tick.C:
			b, _ := os.ReadFile(file)
			if string(b) != applied {
				applied = string(b)
				apply(proxies, applied)
			}
		case <-done:
			cancel()
			for range proxies {
				<-served
			}
			return cmd.ProcessState.ExitCode(), nil
		}
	}
}

// apply puts the faults of spec on the proxies, every other link passing.
func apply(proxies map[int]*faultproxy.Proxy, spec string) {
	for _, px := range proxies {
		px.Set(faultproxy.Pass)
		px.SetDelay(0)
		px.SetLoss(0, 0)
	}
	for _, line := range strings.Split(spec, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		p, err := strconv.Atoi(f[0])
		px := proxies[p]
		if err != nil || px == nil {
			fmt.Fprintf(os.Stderr, "linkfault: no link to rank %q\n", f[0])
			continue
		}
		switch f[1] {
		case "delay":
			d, _ := time.ParseDuration(f[2])
			px.SetDelay(d)
		case "loss":
			l, _ := strconv.ParseFloat(f[2], 64)
			px.SetLoss(l, uint64(p))
		case "both":
			px.Set(mode(f[2]))
		case "to":
			px.SetToTarget(mode(f[2]))
		case "from":
			px.SetToClient(mode(f[2]))
		}
	}
}

func mode(s string) faultproxy.Mode {
	switch s {
	case "pause":
		return faultproxy.Pause
	case "blackhole":
		return faultproxy.Blackhole
	case "drop":
		return faultproxy.Drop
	}
	return faultproxy.Pass
}
