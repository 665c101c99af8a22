package warm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sync/errgroup"

	"github.com/spindle-ml/spindle/internal/envcontract"
)

// ErrBadRun marks a run refused before anything ran: an unknown session,
// or a command a session cannot run.
var ErrBadRun = errors.New("warm: bad run")

// Record is what a running session's ID.json in the registry says.
type Record struct {
	ID           string `json:"id"`
	Dir          string `json:"dir"`
	Token        string `json:"token"`
	NumExecutors int    `json:"num_executors"`
	// Addrs holds, by rank, where a rank away from the session's host
	// (a standalone worker elsewhere) serves over TCP; empty for a rank
	// on this host.
	Addrs []string `json:"addrs,omitempty"`
}

// RegistryDir is where this user's sessions are recorded:
// $SPINDLE_SESSIONS_DIR, else spindle-sessions-UID in the temporary
// directory (the Python package's _session_cli.registry agrees).
func RegistryDir() string {
	if d := os.Getenv(envcontract.SessionsDir); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "spindle-sessions-"+strconv.Itoa(os.Getuid()))
}

// Load reads session id's record from the registry dir, which must be
// this user's alone.
func Load(dir, id string) (*Record, error) {
	if id == "" || strings.ContainsAny(id, `/\`) || strings.HasPrefix(id, ".") {
		return nil, fmt.Errorf("%w: %q is not a session ID (spindle session list shows them)", ErrBadRun, id)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: no session %q: %v", ErrBadRun, id, err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Getuid() || st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: session registry %s is not this user's private directory (mode 0700)", ErrBadRun, dir)
	}
	b, err := os.ReadFile(filepath.Join(dir, id+".json"))
	if err != nil {
		return nil, fmt.Errorf("%w: no session %q (spindle session list shows them): %v", ErrBadRun, id, err)
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil || rec.NumExecutors < 1 || rec.Dir == "" {
		return nil, fmt.Errorf("%w: session record %s: unreadable (%v)", ErrBadRun, filepath.Join(dir, id+".json"), err)
	}
	return &rec, nil
}

// PythonArgv is the Python command line of argv for a warm interpreter:
// the interpreter dropped, leaving SCRIPT ARGS, -m MODULE ARGS or -c CODE
// ARGS. Anything else is refused: only Python runs in a session.
func PythonArgv(argv []string) ([]string, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("%w: --session needs a command after --", ErrBadRun)
	}
	switch {
	case strings.HasPrefix(filepath.Base(argv[0]), "python"):
		argv = argv[1:]
	case !strings.HasSuffix(argv[0], ".py"):
		return nil, fmt.Errorf("%w: --session runs Python in the session's warm interpreters: %q is not python nor a .py script (submit it without --session)", ErrBadRun, argv[0])
	}
	if len(argv) == 0 || ((argv[0] == "-m" || argv[0] == "-c") && len(argv) < 2) ||
		(strings.HasPrefix(argv[0], "-") && argv[0] != "-m" && argv[0] != "-c") {
		return nil, fmt.Errorf("%w: --session takes `python SCRIPT`, `python -m MODULE` or `python -c CODE`, not %q", ErrBadRun, strings.Join(argv, " "))
	}
	return argv, nil
}

// RankFailed is a run whose rank exited non-zero.
type RankFailed struct {
	Rank, Code int
}

func (e *RankFailed) Error() string { return fmt.Sprintf("rank %d exited %d", e.Rank, e.Code) }

// Submit runs argv (a Python command line, PythonArgv's) in every rank of
// the session rec, in cwd, and waits for all of them. Their output is
// copied to stdout and stderr a line at a time, marked "[rank N] ". It
// returns a *RankFailed for the lowest rank that exited non-zero.
func Submit(ctx context.Context, rec *Record, argv []string, cwd string, stdout, stderr io.Writer) error {
	awayFields, err := awayRequest(rec, argv, cwd)
	if err != nil {
		return err
	}
	// One run at a time: each rank serves its requests in turn, so two
	// runs let in at once could each hold a rank the other waits for.
	unlock, err := lockRuns(rec.Dir)
	if err != nil {
		return err
	}
	defer unlock()
	port, err := masterPort(ctx, rec)
	if err != nil {
		return err
	}
	job, err := NextJob(rec.Dir)
	if err != nil {
		return err
	}
	fields := map[string]any{"op": "exec", "argv": argv, "cwd": cwd, "token": rec.Token,
		"env": map[string]string{"MASTER_PORT": strconv.Itoa(port), envcontract.SessionJob: strconv.Itoa(job)}}
	req, err := requestLine(fields, nil)
	if err != nil {
		return err
	}
	var away []byte
	if awayFields != nil {
		if away, err = requestLine(fields, awayFields); err != nil {
			return err
		}
	}
	out := &lockedLines{w: [2]io.Writer{stdout, stderr}}
	codes := make([]int, rec.NumExecutors)
	g, ctx := errgroup.WithContext(ctx)
	for r := range rec.NumExecutors {
		g.Go(func() error {
			var c int
			var err error
			if rec.away(r) {
				c, err = runRankAway(ctx, rec, r, away, out)
			} else {
				c, err = runRank(ctx, rec, r, req, out)
			}
			codes[r] = c
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for r, c := range codes {
		if c != 0 {
			return &RankFailed{Rank: r, Code: c}
		}
	}
	return nil
}

// runRank sends rank r its request with the write ends of two pipes, copies
// what comes out of their read ends, and returns the rank's exit code.
func runRank(ctx context.Context, rec *Record, r int, req []byte, out *lockedLines) (int, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", filepath.Join(rec.Dir, fmt.Sprintf("rank-%d.sock", r)))
	if err != nil {
		return 0, fmt.Errorf("session %s rank %d: %w", rec.ID, r, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	var copies sync.WaitGroup
	var writeEnds []*os.File
	for stream := range 2 {
		rd, wr, err := os.Pipe()
		if err != nil {
			return 0, err
		}
		writeEnds = append(writeEnds, wr)
		copies.Add(1)
		go func() {
			defer copies.Done()
			defer rd.Close()
			out.copy(r, stream, rd)
		}()
	}
	// The copies end when the rank's process closes its ends; ours are
	// closed as soon as they are sent.
	defer copies.Wait()
	_, _, err = conn.(*net.UnixConn).WriteMsgUnix(req, syscall.UnixRights(int(writeEnds[0].Fd()), int(writeEnds[1].Fd())), nil)
	for _, w := range writeEnds {
		w.Close()
	}
	if err != nil {
		return 0, fmt.Errorf("session %s rank %d: send the run: %w", rec.ID, r, err)
	}
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		var a struct {
			Exit  *int   `json:"exit"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			return 0, fmt.Errorf("session %s rank %d: answer %q: %w", rec.ID, r, sc.Text(), err)
		}
		if a.Error != "" {
			return 0, fmt.Errorf("session %s rank %d: %s", rec.ID, r, a.Error)
		}
		if a.Exit != nil {
			return *a.Exit, nil
		}
	}
	return 0, fmt.Errorf("session %s rank %d: the rank went away before the run ended (%v)", rec.ID, r, sc.Err())
}

// lockedLines writes whole lines, marked with their rank, to stdout or
// stderr, one at a time.
type lockedLines struct {
	mu sync.Mutex
	w  [2]io.Writer
}

func (l *lockedLines) copy(rank, stream int, rd io.Reader) {
	br := bufio.NewReader(rd)
	prefix := []byte("[rank " + strconv.Itoa(rank) + "] ")
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if line[len(line)-1] != '\n' {
				line = append(line, '\n')
			}
			l.mu.Lock()
			l.w[stream].Write(append(append([]byte(nil), prefix...), line...))
			l.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// lockRuns takes the session's run lock (the file run.lock in its
// directory, which spindle.Session.run takes too), waiting for a run in
// progress to end.
func lockRuns(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "run.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("session run lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("session run lock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}

// masterPort asks rank 0 for a port free on its host: the job's
// MASTER_PORT, which PyTorch's store binds there, and for a session on a
// cluster that is another host than this one.
func masterPort(ctx context.Context, rec *Record) (int, error) {
	network, addr := "unix", filepath.Join(rec.Dir, "rank-0.sock")
	if rec.away(0) {
		network, addr = "tcp", rec.Addrs[0]
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return 0, fmt.Errorf("session %s rank 0 (for a MASTER_PORT): %w", rec.ID, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	req, err := requestLine(map[string]any{"op": "port", "token": rec.Token}, nil)
	if err != nil {
		return 0, err
	}
	if _, err := conn.Write(req); err != nil {
		return 0, fmt.Errorf("session %s rank 0: ask for a MASTER_PORT: %w", rec.ID, err)
	}
	var a struct {
		Port  int    `json:"port"`
		Error string `json:"error"`
	}
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		return 0, fmt.Errorf("session %s rank 0: no MASTER_PORT answered: %w", rec.ID, err)
	}
	switch err := json.Unmarshal(line, &a); {
	case err != nil:
		return 0, fmt.Errorf("session %s rank 0: answer %q: %w", rec.ID, line, err)
	case a.Error != "":
		return 0, fmt.Errorf("session %s rank 0: %s", rec.ID, a.Error)
	case a.Port <= 0 || a.Port > 65535:
		return 0, fmt.Errorf("session %s rank 0: answer %q names no port", rec.ID, line)
	}
	return a.Port, nil
}
