package warm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
)

// A rank away from this host (a standalone worker or YARN container
// elsewhere) serves its session over TCP, which carries no file
// descriptors: its output comes back in its answers, and a script's
// text goes in the request, since its file is on this host only.

// awayRequest returns the fields a request to ranks away from this host
// adds (the script's text), or nil when every rank of rec runs here.
func awayRequest(rec *Record, argv []string, cwd string) (map[string]any, error) {
	away := false
	for r := range rec.Addrs {
		away = away || rec.away(r)
	}
	if !away {
		return nil, nil
	}
	if argv[0] == "-m" || argv[0] == "-c" {
		return map[string]any{}, nil
	}
	path := argv[0]
	if !filepath.IsAbs(path) {
		path = filepath.Join(cwd, path)
	}
	script, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: script %s, for the session's ranks on other hosts: %v", ErrBadRun, path, err)
	}
	return map[string]any{"script": script}, nil
}

// away reports whether rank r serves away from this host (over TCP).
func (rec *Record) away(r int) bool { return r < len(rec.Addrs) && rec.Addrs[r] != "" }

// requestLine is the JSON line of a request: fields, and extra's beside.
func requestLine(fields, extra map[string]any) ([]byte, error) {
	all := make(map[string]any, len(fields)+len(extra))
	for k, v := range fields {
		all[k] = v
	}
	for k, v := range extra {
		all[k] = v
	}
	b, err := json.Marshal(all)
	if err != nil {
		return nil, fmt.Errorf("session request: %w", err)
	}
	return append(b, '\n'), nil
}

// runRankAway sends rank r, which serves on rec.Addrs[r], its request,
// copies the output its answers carry, and returns the rank's exit code.
func runRankAway(ctx context.Context, rec *Record, r int, req []byte, out *lockedLines) (int, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", rec.Addrs[r])
	if err != nil {
		return 0, fmt.Errorf("session %s rank %d at %s: %w", rec.ID, r, rec.Addrs[r], err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	// Each stream's bytes go through a pipe into the same line marking as
	// a rank's here.
	var copies sync.WaitGroup
	var writers [2]*io.PipeWriter
	for stream := range 2 {
		rd, wr := io.Pipe()
		writers[stream] = wr
		copies.Add(1)
		go func() {
			defer copies.Done()
			out.copy(r, stream, rd)
		}()
	}
	defer copies.Wait()
	defer func() {
		for _, w := range writers {
			w.Close()
		}
	}()
	if _, err := conn.Write(req); err != nil {
		return 0, fmt.Errorf("session %s rank %d: send the run: %w", rec.ID, r, err)
	}
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var a struct {
			Exit  *int   `json:"exit"`
			Error string `json:"error"`
			Out   int    `json:"out"`
			Data  []byte `json:"data"`
		}
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			return 0, fmt.Errorf("session %s rank %d: answer %q: %w", rec.ID, r, sc.Text(), err)
		}
		switch {
		case a.Error != "":
			return 0, fmt.Errorf("session %s rank %d: %s", rec.ID, r, a.Error)
		case a.Out == 1 || a.Out == 2:
			writers[a.Out-1].Write(a.Data)
		case a.Exit != nil:
			return *a.Exit, nil
		}
	}
	return 0, fmt.Errorf("session %s rank %d: the rank went away before the run ended (%v)", rec.ID, r, sc.Err())
}
