package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// runPerftest measures UCX's own tag_bw between two ucx_perftest processes
// on 127.0.0.1 over transport tls, and returns the overall bandwidth in
// GB/s. It is the ceiling of the UCX link on that transport.
func runPerftest(ctx context.Context, tls string, size int) (float64, error) {
	bin, err := exec.LookPath("ucx_perftest")
	if err != nil {
		return 0, fmt.Errorf("ucx_perftest not found (Debian's ucx-utils): %w", err)
	}
	iters := min(20000, max(10, (512<<20)/size))
	port, err := freePort()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	env := append(os.Environ(), "UCX_TLS="+tls)
	server := exec.CommandContext(ctx, bin, "-p", strconv.Itoa(port))
	server.Env = env
	var serverOut bytes.Buffer
	server.Stdout, server.Stderr = &serverOut, &serverOut
	if err := server.Start(); err != nil {
		return 0, fmt.Errorf("start ucx_perftest server: %w", err)
	}
	defer func() {
		server.Process.Kill()
		server.Wait()
	}()
	// The client retries until the server listens.
	var out []byte
	for {
		client := exec.CommandContext(ctx, bin, "127.0.0.1", "-p", strconv.Itoa(port),
			"-t", "tag_bw", "-s", strconv.Itoa(size), "-n", strconv.Itoa(iters))
		client.Env = env
		out, err = client.CombinedOutput()
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return 0, fmt.Errorf("ucx_perftest tag_bw -s %d over %s: %w\n%s", size, tls, err, tail(string(out), 2000))
	}
	mibps, err := parsePerftest(out)
	if err != nil {
		return 0, fmt.Errorf("ucx_perftest tag_bw -s %d over %s: %w\n%s", size, tls, err, tail(string(out), 2000))
	}
	return mibps * (1 << 20) / 1e9, nil
}

// parsePerftest returns the overall bandwidth of ucx_perftest's Final
// line: "Final: iters 50%ile avg overall bw-avg bw-overall rate-avg
// rate-overall", bandwidth in MiB/s (UCX's "MB/s").
func parsePerftest(out []byte) (float64, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 7 && f[0] == "Final:" {
			return strconv.ParseFloat(f[6], 64)
		}
	}
	return 0, errors.New("no Final line")
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
