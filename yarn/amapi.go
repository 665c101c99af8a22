package yarn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/internal/auth"
)

// The ApplicationMaster's driver-facing API (client mode) and, in cluster
// mode, the gateway's. Every request is signed with the AM secret from
// the AM's credentials (amauth.go); executor secrets never cross it (the
// AM has them from its credentials).

// amRelease is the body of POST /v1/release.
type amRelease struct {
	IDs []string `json:"ids"`
}

// amFinish is the body of POST /v1/finish.
type amFinish struct {
	Status      string `json:"status"` // SUCCEEDED, FAILED or KILLED
	Diagnostics string `json:"diagnostics"`
}

// amProgress is the body of POST /v1/progress.
type amProgress struct {
	Done float64 `json:"done"` // 0 to 1
}

// amEvents is the answer of GET /v1/events.
type amEvents struct {
	Next   int            `json:"next"`
	Events []driver.Event `json:"events"`
	// Failed is set once the AM has lost the ResourceManager.
	Failed string `json:"failed,omitempty"`
}

// amError is the body of a failed request.
type amError struct {
	Error string `json:"error"`
}

// eventLog keeps every event the AM emitted, for long polls.
type eventLog struct {
	mu     sync.Mutex
	events []driver.Event
	failed string
	more   chan struct{}
}

func newEventLog() *eventLog { return &eventLog{more: make(chan struct{})} }

func (l *eventLog) add(ev driver.Event) {
	l.mu.Lock()
	l.events = append(l.events, ev)
	close(l.more)
	l.more = make(chan struct{})
	l.mu.Unlock()
}

func (l *eventLog) fail(msg string) {
	l.mu.Lock()
	l.failed = msg
	close(l.more)
	l.more = make(chan struct{})
	l.mu.Unlock()
}

// since waits up to wait for events after n.
func (l *eventLog) since(ctx context.Context, n int, wait time.Duration) amEvents {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		l.mu.Lock()
		if n < 0 || n > len(l.events) {
			n = len(l.events)
		}
		if n < len(l.events) || l.failed != "" {
			out := amEvents{Next: len(l.events), Events: append([]driver.Event(nil), l.events[n:]...), Failed: l.failed}
			l.mu.Unlock()
			return out
		}
		more := l.more
		l.mu.Unlock()
		select {
		case <-more:
		case <-t.C:
			return amEvents{Next: n}
		case <-ctx.Done():
			return amEvents{Next: n}
		}
	}
}

// amHandlers are what the AM does for each call.
type amHandlers struct {
	// signer checks every request's token (the AM secret).
	signer  *auth.Signer
	request func(ctx context.Context, specs []driver.ExecutorSpec) error
	release func(ctx context.Context, ids []string) error
	// progress, in client mode, sets the application's progress (0 to 1).
	progress func(done float32)
	finish   func(f amFinish)
	events   *eventLog
	touch    func()
	// output, in cluster mode, is what the driver prints, streamed to
	// the gateway.
	output *outputLog
}

func (h amHandlers) mux() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("POST /v1/request", func(w http.ResponseWriter, r *http.Request) {
		var specs []driver.ExecutorSpec
		if err := json.NewDecoder(r.Body).Decode(&specs); err != nil {
			writeJSON(w, http.StatusBadRequest, amError{Error: "parse request: " + err.Error()})
			return
		}
		if err := h.request(r.Context(), specs); err != nil {
			writeJSON(w, http.StatusConflict, amError{Error: err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
	})
	m.HandleFunc("POST /v1/release", func(w http.ResponseWriter, r *http.Request) {
		var rel amRelease
		if err := json.NewDecoder(r.Body).Decode(&rel); err != nil {
			writeJSON(w, http.StatusBadRequest, amError{Error: "parse release: " + err.Error()})
			return
		}
		if err := h.release(r.Context(), rel.IDs); err != nil {
			writeJSON(w, http.StatusConflict, amError{Error: err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
	})
	m.HandleFunc("POST /v1/progress", func(w http.ResponseWriter, r *http.Request) {
		var p amProgress
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			writeJSON(w, http.StatusBadRequest, amError{Error: "parse progress: " + err.Error()})
			return
		}
		if h.progress == nil {
			writeJSON(w, http.StatusNotFound, amError{Error: "no progress to set: the driver runs in the ApplicationMaster"})
			return
		}
		h.progress(float32(p.Done))
		writeJSON(w, http.StatusOK, struct{}{})
	})
	m.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("after"))
		writeJSON(w, http.StatusOK, h.events.since(r.Context(), n, 10*time.Second))
	})
	m.HandleFunc("GET /v1/output", func(w http.ResponseWriter, r *http.Request) {
		if h.output == nil {
			writeJSON(w, http.StatusNotFound, amError{Error: "no driver output: the driver of a client-mode job runs on the gateway"})
			return
		}
		n, _ := strconv.Atoi(r.URL.Query().Get("after"))
		writeJSON(w, http.StatusOK, h.output.since(r.Context(), n, 10*time.Second))
	})
	m.HandleFunc("POST /v1/finish", func(w http.ResponseWriter, r *http.Request) {
		var f amFinish
		if err := json.NewDecoder(r.Body).Decode(&f); err != nil {
			writeJSON(w, http.StatusBadRequest, amError{Error: "parse finish: " + err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
		h.finish(f)
	})
	touched := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.touch != nil {
			h.touch()
		}
		m.ServeHTTP(w, r)
	})
	return h.signer.RequireSigned(touched, amMaxBody, func(w http.ResponseWriter, code int, err error) {
		writeJSON(w, code, amError{Error: "ApplicationMaster API: " + err.Error()})
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// amClient calls an ApplicationMaster's API.
type amClient struct {
	base   string
	signer *auth.Signer
	http   *http.Client
}

func (c *amClient) do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = b
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if err := c.signer.SignRequest(req, body); err != nil {
		return fmt.Errorf("sign a request to the ApplicationMaster: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("ApplicationMaster at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e amError
		json.NewDecoder(resp.Body).Decode(&e)
		if e.Error == "" {
			e.Error = resp.Status
		}
		return errors.New(e.Error)
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}
