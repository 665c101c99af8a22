package executor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/task/resume"
)

// checkpointSocket is where the checkpoint service of a task listens, in
// its socket directory.
func checkpointSocket(sockDir string) string {
	return filepath.Join(sockDir, "ckpt.sock")
}

// checkpointBufferBytes is the copy buffer between the socket and the file
// system.
const checkpointBufferBytes = 1 << 20

// checkpointService serves checkpoints to the training process over HTTP
// on a Unix socket named by envcontract.CheckpointService: PUT and GET
// /checkpoint?dir=URI&name=NAME save and load checkpoints in any directory
// the executor can reach, HDFS included, atomically as the Go task package
// does. The Python package uses it for hdfs:// checkpoint directories,
// which it cannot write itself.
type checkpointService struct {
	path   string
	ln     net.Listener
	srv    *http.Server
	res    *fsys.Resolver
	logger *slog.Logger
}

// newCheckpointService listens on a Unix socket at sockPath that only the
// owner may use (the training process runs as the executor's user).
func newCheckpointService(sockPath string, res *fsys.Resolver, logger *slog.Logger) (*checkpointService, error) {
	_ = os.Remove(sockPath) // a leftover of an earlier run in the same directory
	ln, err := net.Listen("unix", sockPath)
	if err != nil {
		return nil, fmt.Errorf("checkpoint service: listen on %s: %w", sockPath, err)
	}
	// The work directory is private already; the socket is too.
	if err := os.Chmod(sockPath, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("checkpoint service: make %s private: %w", sockPath, err)
	}
	s := &checkpointService{path: sockPath, ln: ln, res: res, logger: logger.With("component", "checkpoints")}
	mux := http.NewServeMux()
	mux.HandleFunc("/checkpoint", s.handle)
	mux.HandleFunc("/resume", s.handleResume)
	mux.HandleFunc("/prune", s.handlePrune)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return s, nil
}

// Run serves until ctx ends.
func (s *checkpointService) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { _ = s.srv.Close() })
	defer stop()
	s.srv.BaseContext = func(net.Listener) context.Context { return ctx }
	if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("checkpoint service: %w", err)
	}
	return nil
}

// Close stops serving and removes the socket.
func (s *checkpointService) Close() error {
	err := s.srv.Close()
	_ = os.Remove(s.path)
	return err
}

// resolve finds the file system of a request's checkpoint directory, or
// answers 400 naming it.
func (s *checkpointService) resolve(w http.ResponseWriter, r *http.Request, dir string) (fsys.FS, string, bool) {
	fsy, d, err := s.res.Resolve(r.Context(), dir)
	if err != nil {
		http.Error(w, fmt.Sprintf("checkpoint directory %s: %v", dir, err), http.StatusBadRequest)
		return nil, "", false
	}
	return fsy, d, true
}

func (s *checkpointService) handle(w http.ResponseWriter, r *http.Request) {
	dir, name := r.URL.Query().Get("dir"), r.URL.Query().Get("name")
	if dir == "" || name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." || strings.HasPrefix(name, ".") {
		http.Error(w, fmt.Sprintf("want dir=URI and name=NAME (a plain file name not starting with a dot); got dir=%q name=%q", dir, name), http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	fsy, d, ok := s.resolve(w, r, dir)
	if !ok {
		return
	}
	file := path.Join(d, name)
	switch r.Method {
	case http.MethodPut:
		n, err := saveAtomic(ctx, fsy, d, file, r.Body)
		if err != nil {
			s.logger.Warn("checkpoint not saved", "dir", dir, "name", name, "err", err)
			http.Error(w, fmt.Sprintf("save checkpoint %s in %s: %v", name, dir, err), http.StatusInternalServerError)
			return
		}
		s.logger.Debug("checkpoint saved", "dir", dir, "name", name, "bytes", n)
		w.WriteHeader(http.StatusNoContent)
	case http.MethodGet:
		f, err := fsy.Open(ctx, file)
		if errors.Is(err, fs.ErrNotExist) {
			http.Error(w, fmt.Sprintf("no checkpoint %s in %s", name, dir), http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, fmt.Sprintf("open checkpoint %s in %s: %v", name, dir, err), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", fmt.Sprint(f.Size()))
		if _, err := io.CopyBuffer(w, io.NewSectionReader(f, 0, f.Size()), make([]byte, checkpointBufferBytes)); err != nil {
			s.logger.Warn("checkpoint not sent whole", "dir", dir, "name", name, "err", err)
		}
	default:
		w.Header().Set("Allow", "GET, PUT")
		http.Error(w, "use GET or PUT", http.StatusMethodNotAllowed)
	}
}

// handleResume stores a resume record (PUT /resume?dir=URI, the record as
// JSON) for a process that cannot write the checkpoint directory itself.
func (s *checkpointService) handleResume(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut {
		w.Header().Set("Allow", "PUT")
		http.Error(w, "use PUT", http.StatusMethodNotAllowed)
		return
	}
	dir := r.URL.Query().Get("dir")
	var rec resume.Record
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&rec); err != nil || dir == "" {
		http.Error(w, fmt.Sprintf("want dir=URI and a resume record as JSON (%v)", err), http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	fsy, d, ok := s.resolve(w, r, dir)
	if !ok {
		return
	}
	if err := resume.Write(ctx, fsy, d, rec); err != nil {
		s.logger.Warn("resume record not saved", "dir", dir, "checkpoint", rec.Checkpoint, "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handlePrune deletes old checkpoints for a process that cannot delete in
// the checkpoint directory itself (POST /prune?dir=URI&checkpoint=NAME&
// prefix=P&keep=N): once checkpoint is complete, the complete checkpoints
// of prefix beyond the keep most recently completed go (resume.PruneAfter).
// It answers the names deleted, as a JSON list.
func (s *checkpointService) handlePrune(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	dir, checkpoint, prefix := q.Get("dir"), q.Get("checkpoint"), q.Get("prefix")
	keep, err := strconv.Atoi(q.Get("keep"))
	if err == nil && (dir == "" || resume.CheckName(checkpoint) != nil || resume.CheckName(prefix) != nil || keep < 1) {
		err = fmt.Errorf("got dir=%q checkpoint=%q prefix=%q keep=%d", dir, checkpoint, prefix, keep)
	}
	if err != nil {
		http.Error(w, fmt.Sprintf("want dir=URI, checkpoint=NAME, prefix=PREFIX and keep=N (1 or more): %v", err), http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	fsy, d, ok := s.resolve(w, r, dir)
	if !ok {
		return
	}
	removed, err := resume.PruneAfter(ctx, fsy, d, checkpoint, prefix, keep)
	if err != nil {
		s.logger.Warn("old checkpoints not deleted", "dir", dir, "prefix", prefix, "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if len(removed) > 0 {
		s.logger.Debug("deleted old checkpoints", "dir", dir, "checkpoints", removed, "keep", keep)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(append([]string{}, removed...))
}

// saveAtomic writes body to file under a temporary name and publishes it
// only once every byte is stored: a failed or cut-off upload leaves the
// previous checkpoint in place, never a partial one.
func saveAtomic(ctx context.Context, fsy fsys.FS, dir, file string, body io.Reader) (int64, error) {
	if err := fsys.MkdirPrivate(ctx, fsy, dir); err != nil {
		return 0, err
	}
	af, err := fsys.CreatePrivate(ctx, fsy, file)
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(af, checkpointBufferBytes)
	n, err := io.Copy(bw, body)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		_ = af.Abort()
		return n, err
	}
	return n, af.Commit()
}
