package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/observe/eventlog"
	"github.com/spindle-ml/spindle/observe/jobview"
	"github.com/spindle-ml/spindle/standalone"
	"github.com/spindle-ml/spindle/standalone/client"
	yarnclient "github.com/spindle-ml/spindle/yarn/client"
)

// logsCommand prints a job's training output, from its event log or from
// a running driver's (or history server's) web UI.
func logsCommand() *cli.Command {
	return &cli.Command{
		Name:      "logs",
		Usage:     "print a job's training output (every rank, or one rank or role)",
		ArgsUsage: "JOB_ID",
		Description: "From the job's event log (--dir, spindle.eventLog.dir: every line, running or finished jobs), from\n" +
			"the web UI a running driver or a history server serves (--ui, the address submit prints: the last\n" +
			"2,000 lines of each rank's stream), or, for a job on a standalone cluster, from the workers that ran\n" +
			"it (--master spindle://..., with the cluster secret; JOB_ID is the application id spindle status\n" +
			"lists, or its name; every line, while the workers keep the job's directory: spindle.worker.cleanupDelay).\n" +
			"Standard output lines go to standard output, standard error lines to standard error, each prefixed\n" +
			"with its rank as submit prints them.",
		Flags: append(commonFlags(adminFlags),
			&cli.StringFlag{Name: "dir", Usage: "event log directory: a path, file:// or hdfs:// `URI`"},
			&cli.StringFlag{Name: "ui", Usage: "`URL` of the job's web UI (http://host:4040/) or of a history server"},
			&cli.IntFlag{Name: "rank", Value: -1, Usage: "only this rank"},
			&cli.StringFlag{Name: "role", Usage: "only ranks of this role (worker, chief, ps)"},
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing new lines until the job ends"},
			&cli.DurationFlag{Name: "poll", Value: time.Second, Usage: "how often --follow looks for new lines"},
		),
		Action: runLogs,
	}
}

func runLogs(c *cli.Context) error {
	if c.NArg() != 1 {
		return cli.Exit("name one job: spindle logs --dir EVENT_LOG_DIR JOB_ID (or --ui URL)", exitUsage)
	}
	id := c.Args().First()
	var src logSource
	switch dir, ui := c.String("dir"), c.String("ui"); {
	case btoi(dir != "")+btoi(ui != "")+btoi(c.IsSet("master")) > 1:
		return cli.Exit("give one of --dir, --ui and --master", exitUsage)
	case c.IsSet("master"):
		cl, err := adminClient(c)
		if err != nil {
			return cli.Exit(err, exitUsage)
		}
		defer cl.Close()
		src = &masterSource{cl: cl}
		defer src.(*masterSource).close()
	case dir != "":
		res := fsys.NewResolver(fsys.Options{})
		defer res.Close()
		src = &eventLogSource{res: res, dir: dir}
	case ui != "":
		u, err := url.Parse(ui)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return cli.Exit(fmt.Sprintf("--ui %q: want the web UI's address, as in http://host:4040/", ui), exitUsage)
		}
		src = &uiSource{base: strings.TrimSuffix(ui, "/"), client: &http.Client{Timeout: 30 * time.Second}}
	case yarnclient.IsAppID(id):
		ui, jobID, err := yarnJobUI(c, id)
		if err != nil {
			return cli.Exit(err, exitUsage)
		}
		src, id = ui, jobID
	default:
		return cli.Exit("say where the job's logs are: --dir EVENT_LOG_DIR (spindle.eventLog.dir), --ui URL (the address submit printed) "+
			"or, on a standalone cluster, --master spindle://HOST:PORT,...", exitUsage)
	}
	f := logFilter{rank: c.Int("rank"), role: c.String("role")}
	p := &logPrinter{out: c.App.Writer, err: c.App.ErrWriter, filter: f}
	for first := true; ; first = false {
		final, err := src.next(c.Context, id, p)
		switch {
		case errors.Is(err, errNoSuchJob), errors.Is(err, standalone.ErrNoSuchApp):
			return cli.Exit(err, exitUsage)
		case err != nil && first:
			return cli.Exit(err, exitUsage)
		case err != nil:
			return cli.Exit(err, exitJobFailed)
		}
		done := !c.Bool("follow") || final
		// A running job may not have all its ranks yet: judge the filter
		// once the lines are all in.
		if done && !p.matched {
			if msg := f.missing(p.known); msg != "" {
				return cli.Exit(fmt.Sprintf("job %s: %s", id, msg), exitUsage)
			}
		}
		if done {
			return nil
		}
		select {
		case <-c.Context.Done():
			return nil
		case <-time.After(c.Duration("poll")):
		}
	}
}

var errNoSuchJob = errors.New("no such job")

// logSource hands a printer the lines it has not seen yet and says
// whether the job has ended.
type logSource interface {
	next(ctx context.Context, id string, p *logPrinter) (final bool, err error)
}

// logFilter picks ranks by number or role.
type logFilter struct {
	rank int // -1: any
	role string
}

func (f logFilter) wants(rank int, role string) bool {
	return (f.rank < 0 || f.rank == rank) && (f.role == "" || f.role == role)
}

// missing says which filter matched no rank of the job, given the ranks
// and roles known.
func (f logFilter) missing(known map[int]string) string {
	if f.rank >= 0 {
		if _, ok := known[f.rank]; !ok {
			return fmt.Sprintf("no rank %d (the job has %d ranks)", f.rank, len(known))
		}
	}
	if f.role != "" {
		roles := map[string]bool{}
		for _, r := range known {
			roles[r] = true
		}
		if !roles[f.role] {
			return fmt.Sprintf("no rank has role %q", f.role)
		}
	}
	return ""
}

// logPrinter prints lines of the ranks its filter wants.
type logPrinter struct {
	out, err io.Writer
	filter   logFilter
	known    map[int]string // rank to role, as far as seen
	matched  bool
}

func (p *logPrinter) rank(rank int, role string) {
	if p.known == nil {
		p.known = map[int]string{}
	}
	if role == "" {
		role = "worker"
	}
	p.known[rank] = role
}

// raw prints a line as an executor wrote it: prefixed with its role
// ("[ps 1] ..."), or the executor's own, unprefixed.
func (p *logPrinter) raw(stream, line string) {
	p.matched = true
	w := p.out
	if stream == "stderr" {
		w = p.err
	}
	fmt.Fprintln(w, line)
}

func (p *logPrinter) line(rank int, stream, text string) {
	if !p.filter.wants(rank, p.known[rank]) {
		return
	}
	p.matched = true
	w := p.out
	if stream == "stderr" {
		w = p.err
	}
	fmt.Fprintf(w, "[rank %d] %s\n", rank, text)
}

// eventLogSource reads a job's event log: every line it recorded.
type eventLogSource struct {
	res  *fsys.Resolver
	dir  string
	seen int // events already handled
}

func (s *eventLogSource) next(ctx context.Context, id string, p *logPrinter) (bool, error) {
	found, err := eventlog.List(ctx, s.res, s.dir)
	if err != nil {
		return false, fmt.Errorf("--dir %s: %w", s.dir, err)
	}
	var job *eventlog.Job
	for i := range found {
		if found[i].ID == id {
			job = &found[i]
		}
	}
	if job == nil {
		return false, fmt.Errorf("%w %s in %s", errNoSuchJob, id, s.dir)
	}
	events, err := eventlog.Read(ctx, s.res, s.dir, id)
	if err != nil {
		return false, fmt.Errorf("read the event log of job %s: %w", id, err)
	}
	final := job.Complete
	for _, ev := range events[min(s.seen, len(events)):] {
		switch ev.Kind {
		case jobview.KindExecutor:
			p.rank(ev.Rank, ev.Role)
		case jobview.KindLog:
			if _, ok := p.known[ev.Rank]; !ok {
				p.rank(ev.Rank, "")
			}
			p.line(ev.Rank, ev.Stream, ev.Line)
		case jobview.KindJobState:
			final = final || jobview.IsFinal(ev.State)
		}
	}
	s.seen = max(s.seen, len(events))
	return final, nil
}

// uiSource reads a web UI's JSON API: the last lines of each stream.
type uiSource struct {
	base    string
	client  *http.Client
	offsets map[string]int64 // "rank/stream" to the next line to ask for
	reached bool             // the UI answered once
}

func (s *uiSource) next(ctx context.Context, id string, p *logPrinter) (bool, error) {
	var snap jobview.Snapshot
	if err := s.get(ctx, "/api/jobs/"+url.PathEscape(id), &snap); err != nil {
		if s.gone(err, p) {
			return true, nil
		}
		return false, err
	}
	s.reached = true
	if s.offsets == nil {
		s.offsets = map[string]int64{}
	}
	for _, r := range snap.Ranks {
		p.rank(r.Rank, r.Role)
	}
	for _, r := range snap.Ranks {
		if !p.filter.wants(r.Rank, p.known[r.Rank]) {
			continue
		}
		for _, stream := range []string{"stdout", "stderr"} {
			key := strconv.Itoa(r.Rank) + "/" + stream
			var chunk jobview.LogChunk
			path := fmt.Sprintf("/api/jobs/%s/ranks/%d/log?stream=%s&from=%d", url.PathEscape(id), r.Rank, stream, s.offsets[key])
			if err := s.get(ctx, path, &chunk); err != nil {
				if s.gone(err, p) {
					return true, nil
				}
				return false, err
			}
			for _, l := range chunk.Lines {
				p.line(r.Rank, stream, l)
			}
			s.offsets[key] = chunk.Next
		}
	}
	return jobview.IsFinal(snap.State), nil
}

// gone says whether err is the UI going away after it answered once (a
// driver's UI ends with its job), which ends following it, and says so.
func (s *uiSource) gone(err error, p *logPrinter) bool {
	var ue *url.Error
	if !s.reached || !errors.As(err, &ue) {
		return false
	}
	fmt.Fprintf(p.err, "the web UI at %s is gone: the job has ended (its event log, spindle.eventLog.dir, keeps every line)\n", s.base)
	return true
}

func (s *uiSource) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("reach the web UI at %s: %w", s.base, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	switch {
	case resp.StatusCode == http.StatusNotFound && strings.HasPrefix(path, "/api/jobs/") && !strings.Contains(path, "/ranks/"):
		return fmt.Errorf("%w %s at %s", errNoSuchJob, strings.TrimPrefix(path, "/api/jobs/"), s.base)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("GET %s%s: %s: %s", s.base, path, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s%s: %w", s.base, path, err)
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// masterSource reads a standalone job's executor logs from the workers
// that ran it.
type masterSource struct {
	cl *client.Client
	r  *standalone.AppLogReader
}

func (s *masterSource) next(ctx context.Context, id string, p *logPrinter) (bool, error) {
	if s.r == nil {
		r, err := standalone.NewAppLogReader(ctx, s.cl, id)
		if err != nil {
			return false, err
		}
		s.r = r
	}
	chunks, ended, err := s.r.Next(ctx)
	for i, ch := range chunks {
		role := cmp.Or(ch.Executor.GetRole(), "worker")
		for _, l := range ch.Lines {
			rank, text, ok := rankPrefixed(l)
			switch {
			case ok:
				p.rank(rank, role)
				p.line(rank, ch.Stream, text)
			case strings.HasPrefix(l, "["+role+" ") || l == "[chief]" || strings.HasPrefix(l, "[chief] "):
				// A job with roles prefixes lines by role: its ranks are
				// known by role only.
				p.rank(-1-i, role)
				if p.filter.rank < 0 && (p.filter.role == "" || p.filter.role == role) {
					p.raw(ch.Stream, l)
				}
			case p.filter.rank < 0 && p.filter.role == "":
				p.raw(ch.Stream, l) // the executor's own
			}
		}
	}
	if err != nil {
		return false, err
	}
	return ended, nil
}

func (s *masterSource) close() {
	if s.r != nil {
		s.r.Close()
	}
}

// rankPrefixed splits "[rank N] text".
func rankPrefixed(line string) (int, string, bool) {
	rest, ok := strings.CutPrefix(line, "[rank ")
	if !ok {
		return 0, "", false
	}
	num, text, ok := strings.Cut(rest, "] ")
	if !ok {
		num, ok = strings.CutSuffix(rest, "]")
		if !ok {
			return 0, "", false
		}
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return 0, "", false
	}
	return n, text, true
}

// yarnJobUI finds a running YARN application's job through the
// ResourceManager: its driver's web UI is the application's original
// tracking URL, and serves the job's output. A finished application's
// output is in YARN's log aggregation, or in the job's event log.
func yarnJobUI(c *cli.Context, app string) (*uiSource, string, error) {
	ended := fmt.Sprintf("give --dir with its event log (spindle.eventLog.dir: jobs write one only when it is set, best in spindle-defaults.conf, as conf/spindle-defaults.conf.template suggests); YARN's log aggregation keeps its containers' output: yarn logs -applicationId %s", app)
	cl, err := yarnClient(c)
	if err != nil {
		return nil, "", fmt.Errorf("YARN application %s: cannot ask the ResourceManager for its web UI (%v); give --ui with its tracking URL, or %s", app, err, ended)
	}
	defer cl.Close()
	appID, _ := yarnclient.ParseAppID(app)
	r, err := cl.Report(c.Context, appID)
	if err != nil {
		return nil, "", fmt.Errorf("YARN application %s: %v; %s", app, err, ended)
	}
	if yarnclient.IsFinal(r.GetYarnApplicationState()) {
		return nil, "", fmt.Errorf("YARN application %s has ended (%s, %s): %s", app, r.GetYarnApplicationState(), finalStatusName(r.GetFinalApplicationStatus()), ended)
	}
	base, ok := webUIBase(r.GetOriginalTrackingUrl())
	if !ok {
		return nil, "", fmt.Errorf("YARN application %s (%s) has no job web UI yet (tracking URL %q): try again once it runs, or %s", app, r.GetYarnApplicationState(), base, ended)
	}
	src, id, err := driverUI(c.Context, base, 30*time.Second)
	if err != nil {
		return nil, "", fmt.Errorf("YARN application %s: %w", app, err)
	}
	return src, id, nil
}

// webUIBase returns a YARN application's original tracking URL without
// its trailing slash, and whether it is a web UI's (http or https, with a
// host): before the AM registers, YARN reports "N/A" or nothing.
func webUIBase(tracking string) (string, bool) {
	base := strings.TrimSuffix(tracking, "/")
	u, err := url.Parse(base)
	return base, err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// driverUI reads a driver's web UI at base and returns it and its job's
// id; each request gives up after timeout.
func driverUI(ctx context.Context, base string, timeout time.Duration) (*uiSource, string, error) {
	src := &uiSource{base: base, client: &http.Client{Timeout: timeout}}
	var jobs []jobview.Summary
	if err := src.get(ctx, "/api/jobs", &jobs); err != nil {
		return nil, "", fmt.Errorf("its job's web UI at %s: %w", base, err)
	}
	if len(jobs) != 1 {
		return nil, "", fmt.Errorf("the web UI at %s serves %d jobs, not its driver's one", base, len(jobs))
	}
	return src, jobs[0].ID, nil
}
