package webui

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spindle-ml/spindle/observe/jobview"
)

//go:embed assets
var assets embed.FS

// Handler returns the pages and API over src. metrics, when not nil, is
// served at /metrics.
func Handler(src Source, metrics http.Handler) http.Handler {
	static, _ := fs.Sub(assets, "assets")
	h := &handler{src: src}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/info", h.info)
	mux.HandleFunc("GET /api/jobs", h.jobs)
	mux.HandleFunc("GET /api/jobs/{id}", h.job)
	mux.HandleFunc("GET /api/jobs/{id}/ranks/{rank}/log", h.log)
	mux.HandleFunc("GET /api/jobs/{id}/ranks/{rank}/log/download", h.download)
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	index, _ := fs.ReadFile(static, "index.html")
	page := func(w http.ResponseWriter, r *http.Request) {
		// Links are relative to the page, so that the pages work under a
		// proxy's path prefix (YARN's /proxy/APP_ID/) as well as at /.
		root := strings.Repeat("../", strings.Count(strings.Trim(r.URL.Path, "/"), "/"))
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(bytes.ReplaceAll(index, []byte("{{ROOT}}"), []byte(cmp.Or(root, "./"))))
	}
	mux.HandleFunc("GET /{$}", page)
	mux.HandleFunc("GET /jobs/{id}", page)
	mux.HandleFunc("GET /jobs/{id}/ranks/{rank}", page)
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	return secureHeaders(mux)
}

// secureHeaders keeps the pages to their own assets: the app loads nothing
// from elsewhere, and nothing may frame it.
func secureHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

type handler struct{ src Source }

func (h *handler) info(w http.ResponseWriter, r *http.Request) {
	out := map[string]any{"live": h.src.Live()}
	if h.src.Live() {
		if jobs, err := h.src.Jobs(r.Context()); err == nil && len(jobs) == 1 {
			out["job"] = jobs[0].ID
		}
	}
	writeJSON(w, out)
}

// jobs lists jobs, filtered by ?q= (a part of the name or id) and ?state=.
func (h *handler) jobs(w http.ResponseWriter, r *http.Request) {
	all, err := h.src.Jobs(r.Context())
	if err != nil {
		httpError(w, err)
		return
	}
	q := strings.ToLower(r.URL.Query().Get("q"))
	state := strings.ToUpper(r.URL.Query().Get("state"))
	out := []jobview.Summary{}
	for _, s := range all {
		if q != "" && !strings.Contains(strings.ToLower(s.Name), q) && !strings.Contains(strings.ToLower(s.ID), q) {
			continue
		}
		if state != "" && s.State != state {
			continue
		}
		out = append(out, s)
	}
	writeJSON(w, out)
}

func (h *handler) job(w http.ResponseWriter, r *http.Request) {
	j, err := h.src.Job(r.Context(), r.PathValue("id"))
	if err != nil {
		httpError(w, err)
		return
	}
	offset, limit, err := rankPage(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	snap := j.Snapshot(time.Now())
	snap.PageRanks(offset, limit)
	writeJSON(w, snap)
}

// rankPage reads ?offset= and ?limit=, the page of the ranks table a job's
// data holds (no limit: every rank).
func rankPage(r *http.Request) (offset, limit int, err error) {
	for _, p := range []struct {
		name string
		to   *int
	}{{"offset", &offset}, {"limit", &limit}} {
		v := r.URL.Query().Get(p.name)
		if v == "" {
			continue
		}
		if *p.to, err = strconv.Atoi(v); err != nil || *p.to < 0 {
			return 0, 0, fmt.Errorf("%s %q: want a count of ranks", p.name, v)
		}
	}
	return offset, limit, nil
}

// logChunk finds the job and rank a log route names.
func (h *handler) logChunk(w http.ResponseWriter, r *http.Request) (jobview.LogChunk, bool) {
	j, err := h.src.Job(r.Context(), r.PathValue("id"))
	if err != nil {
		httpError(w, err)
		return jobview.LogChunk{}, false
	}
	rank, err := strconv.Atoi(r.PathValue("rank"))
	if err != nil {
		http.Error(w, fmt.Sprintf("rank %q is not a number", r.PathValue("rank")), http.StatusBadRequest)
		return jobview.LogChunk{}, false
	}
	stream := r.URL.Query().Get("stream")
	if stream == "" {
		stream = "stderr"
	}
	if stream != "stdout" && stream != "stderr" {
		http.Error(w, fmt.Sprintf("stream %q: want stdout or stderr", stream), http.StatusBadRequest)
		return jobview.LogChunk{}, false
	}
	var from int64
	if v := r.URL.Query().Get("from"); v != "" {
		if from, err = strconv.ParseInt(v, 10, 64); err != nil || from < 0 {
			http.Error(w, fmt.Sprintf("from %q: want a line number", v), http.StatusBadRequest)
			return jobview.LogChunk{}, false
		}
	}
	c, ok := j.Log(rank, stream, from)
	if !ok {
		http.Error(w, fmt.Sprintf("job %s has no rank %d", r.PathValue("id"), rank), http.StatusNotFound)
		return jobview.LogChunk{}, false
	}
	return c, true
}

func (h *handler) log(w http.ResponseWriter, r *http.Request) {
	if c, ok := h.logChunk(w, r); ok {
		writeJSON(w, c)
	}
}

func (h *handler) download(w http.ResponseWriter, r *http.Request) {
	c, ok := h.logChunk(w, r)
	if !ok {
		return
	}
	name := fmt.Sprintf("%s-rank%s-%s.log", r.PathValue("id"), r.PathValue("rank"), r.URL.Query().Get("stream"))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", strings.TrimSuffix(name, "-.log")+".log"))
	for _, l := range c.Lines {
		fmt.Fprintln(w, l)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

func httpError(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrNotFound) {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// Server serves a Handler on one address until its context ends.
type Server struct {
	ln     net.Listener
	srv    *http.Server
	logger *slog.Logger
}

// Listen binds addr ("host:port"; port 0 picks a free one).
func Listen(addr string, h http.Handler, logger *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("web UI: listen on %s: %w", addr, err)
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Server{ln: ln, logger: logger.With("component", "webui"),
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// URL is the address as a link, with a loopback host when bound to all.
func (s *Server) URL(host string) string {
	_, port, _ := net.SplitHostPort(s.ln.Addr().String())
	if host == "" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// Run serves until ctx ends, then shuts down within a second.
func (s *Server) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("web UI: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil {
		_ = s.srv.Close()
	}
	<-errc
	return nil
}
