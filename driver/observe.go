package driver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/feed/push"
	"github.com/spindle-ml/spindle/observe/eventlog"
	"github.com/spindle-ml/spindle/observe/jobview"
	"github.com/spindle-ml/spindle/observe/metrics"
	"github.com/spindle-ml/spindle/observe/webui"

	"github.com/spindle-ml/spindle/internal/rpc"
)

// uiPortTries is how many ports from spindle.ui.port the web UI tries, as
// Spark's UI moves from 4040 to 4041 when two drivers share a gateway.
const uiPortTries = 17

// observer turns what the driver sees into job events, and hands each to
// the job's model (the live web UI), the event log and the metrics, so
// the three always agree.
type observer struct {
	job     *jobview.Job
	metrics *metrics.Driver
	rpc     *rpc.Metrics     // the control plane's calls, by method and code; nil if not registered
	events  *eventlog.Writer // nil without spindle.eventLog.dir
	ui      *webui.Server    // nil with spindle.ui.enabled false
	uiDone  chan error
	cancel  context.CancelFunc
	logger  *slog.Logger

	ranks   map[int]rankSeen    // what was last recorded of each rank
	console *Console            // where forwarded output lines are printed; may be nil
	onEvent func(jobview.Event) // Config.OnEvent; may be nil
	flush   time.Duration       // Config.FlushTimeout (zero: DefaultFlushTimeout)
	tb      tensorBoard         // nil without spindle.tensorboard.dir

	trace *traceWriter // the job's timeline; nil without spindle.timeline

	mu    sync.Mutex
	usage map[int]rankUsage // by rank, from heartbeats (news)
	roles map[int]string    // by rank, as progress saw them
	// renumbered is when the ranks were last renumbered (an elastic job
	// going on without a lost rank): progress taken before it names the
	// ranks by their old numbers.
	renumbered time.Time
	// rankNow maps the rank a process of this generation started with,
	// which prefixes its output lines, to the one it holds now (-1: it
	// left); nil until the ranks are renumbered.
	rankNow map[int]int
}

// rankSeen is what the observer last recorded of a rank, so it records
// changes only.
type rankSeen struct {
	host    string
	state   string
	message string
	rows    int64
	batches int64
	bytes   int64
	epoch   int32
	usage   rankUsage
}

// startObserver starts the web UI and the event log of the job and
// records its submission. What fails here is reported and left out: a
// job runs without its UI rather than not at all.
func (d *Driver) startObserver(ctx context.Context) *observer {
	c := d.cfg
	o := &observer{job: jobview.NewJob(), logger: d.logger, ranks: map[int]rankSeen{}, console: c.Console, usage: map[int]rankUsage{}, roles: map[int]string{},
		onEvent: c.OnEvent, flush: c.FlushTimeout}
	if c.Timeline != "" {
		tw, err := newTraceWriter(c.Timeline)
		if err != nil {
			d.logger.Warn("the job records no timeline", "err", err)
		} else {
			o.trace = tw
		}
	}
	reg := metrics.NewRegistry()
	o.metrics = metrics.NewDriver(reg)
	if m, err := rpc.NewMetrics(reg); err != nil {
		d.logger.Warn("the control plane's calls are not on /metrics", "err", err)
	} else {
		o.rpc = m
	}
	if d.push != nil {
		if err := metrics.RegisterPush(reg, push.RefuseReasons[:], d.pushTotals); err != nil {
			d.logger.Warn("the push endpoint's metrics are not on /metrics", "err", err)
		}
	}
	ctx, o.cancel = context.WithCancel(ctx)
	if c.EventLogDir != "" {
		w, err := eventlog.NewWriter(ctx, d.res, c.EventLogDir, c.JobID, c.EventLogFlush, d.logger)
		if err != nil {
			d.logger.Warn("the job writes no event log", "dir", c.EventLogDir, "err", err)
		} else {
			o.events = w
		}
	}
	info := &jobview.Info{ID: c.JobID, Name: c.AppName, User: currentUser(c.HadoopUser), Mode: c.Mode,
		Command: c.Command, Settings: jobview.Redact(c.Settings), Roles: map[string]int{}}
	for _, r := range c.Roles() {
		info.Roles[string(r.Role)] += r.Count
		info.WorldSize += r.Count
	}
	if p := d.push; p != nil {
		info.Push = &jobview.PushInput{Endpoint: p.uri, TokenFile: p.tokenFile, CAFile: p.caFile}
	}
	o.record(jobview.Event{Kind: jobview.KindSubmitted, Info: info})
	o.record(jobview.Event{Kind: jobview.KindJobState, State: jobview.StateRunning})
	if c.TensorBoardDir != "" {
		o.tb = openTensorBoard(ctx, d.res, c.TensorBoardDir, c.JobID, c.TensorBoardPublish, d.logger)
	}
	if c.UIEnabled {
		token := ""
		if c.UIToken {
			token = webui.NewToken()
		}
		h := webui.RequireToken(token, webui.Handler(webui.NewLive(o.job), metrics.Handler(reg)))
		srv, err := listenUI(cmp.Or(c.UIBindHost, c.ListenHost), c.UIPort, h, d.logger)
		if err != nil {
			d.logger.Warn("the job has no web UI", "err", err)
		} else {
			o.ui, o.uiDone = srv, make(chan error, 1)
			go func() { o.uiDone <- srv.Run(ctx) }()
			url := srv.URL(uiHost(cmp.Or(c.UIBindHost, c.AdvertiseHost, c.ListenHost)))
			// The log never holds the token; the console shows it to the
			// submitting user only.
			d.logger.Info("web UI", "url", url, "token", token != "")
			// YARN shows it as the application's tracking URL.
			if t, ok := d.cm.(TrackingURLSetter); ok {
				t.SetTrackingURL(url)
			}
			if c.Console != nil {
				c.Console.Eprintln(fmt.Sprintf("job %s: web UI at %s", c.JobID, withToken(url, token)))
			}
			o.record(jobview.Event{Kind: jobview.KindWebUI, Message: url})
		}
	}
	if c.Console != nil {
		c.Console.setTap(o.outputLine)
	}
	return o
}

// listenUI binds the web UI on host, at port or one of the ports after it.
func listenUI(host string, port int, h http.Handler, logger *slog.Logger) (*webui.Server, error) {
	var first error
	for i := 0; i < uiPortTries; i++ {
		p := port + i
		if port == 0 {
			p = 0
		}
		srv, err := webui.Listen(net.JoinHostPort(host, strconv.Itoa(p)), h, logger)
		if err == nil {
			return srv, nil
		}
		if first == nil {
			first = err
		}
		if port == 0 || !isAddrInUse(err) {
			break
		}
	}
	return nil, fmt.Errorf("%w (spindle.ui.port %d and the %d after it)", first, port, uiPortTries-1)
}

// withToken adds the UI's access token to the link submit prints.
func withToken(url, token string) string {
	if token == "" {
		return url
	}
	return strings.TrimSuffix(url, "/") + "/?token=" + token
}

// uiHost is the host a printed UI link names: the listen address, or
// loopback when the driver listens everywhere.
func uiHost(listen string) string {
	if ip := net.ParseIP(listen); listen == "" || (ip != nil && ip.IsUnspecified()) {
		return "127.0.0.1"
	}
	return listen
}

func currentUser(hadoopUser string) string {
	if hadoopUser != "" {
		return hadoopUser
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return ""
}

// record stamps ev and hands it on.
func (o *observer) record(ev jobview.Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	o.job.Apply(ev)
	o.metrics.Observe(ev)
	if o.events != nil {
		o.events.Record(ev)
	}
	if o.onEvent != nil {
		o.onEvent(ev)
	}
	if ev.Kind == jobview.KindRestart {
		o.mu.Lock()
		o.rankNow = nil // a new gang, numbered afresh
		o.mu.Unlock()
	}
	if o.tb != nil && ev.Kind == jobview.KindScalars {
		o.writeScalars(ev)
	}
}

// outputLine takes one line of the console ("[rank N] text") into the
// rank's log on the job page.
func (o *observer) outputLine(toErr bool, line string) {
	rest, ok := strings.CutPrefix(line, "[rank ")
	if !ok {
		return
	}
	num, text, ok := strings.Cut(rest, "] ")
	if !ok {
		return
	}
	rank, err := strconv.Atoi(num)
	if err != nil {
		return
	}
	if rank = o.current(rank); rank < 0 {
		return // a process the job went on without: its row is gone
	}
	stream := "stdout"
	if toErr {
		stream = "stderr"
	}
	o.record(jobview.Event{Kind: jobview.KindLog, Rank: rank, Stream: stream, Line: text})
}

// renumber records that the gang went on without rank left in a world of
// world ranks, the others renumbered in their old order: the job page
// moves each rank's row to its new number.
func (o *observer) renumber(left, world int) {
	now := time.Now()
	o.mu.Lock()
	o.renumbered = now
	if o.rankNow == nil {
		o.rankNow = make(map[int]int, world+1)
		for r := 0; r <= world; r++ {
			o.rankNow[r] = r
		}
	}
	for started, r := range o.rankNow {
		o.rankNow[started] = movedRank(r, left)
	}
	usage, roles := make(map[int]rankUsage, len(o.usage)), make(map[int]string, len(o.roles))
	for r, u := range o.usage {
		if r = movedRank(r, left); r >= 0 {
			usage[r] = u
		}
	}
	for r, role := range o.roles {
		if r = movedRank(r, left); r >= 0 {
			roles[r] = role
		}
	}
	o.usage, o.roles = usage, roles
	o.mu.Unlock()
	moves := jobview.Renumbering(left, world+1)
	o.record(jobview.Event{Time: now, Kind: jobview.KindRenumber, Rank: left, Renumbered: moves,
		Message: jobview.RenumberMessage(left, moves)})
}

// movedRank is the number rank has once the gang went on without rank
// left: -1 for left itself (and a rank that had left before).
func movedRank(rank, left int) int {
	switch {
	case rank < 0 || rank == left:
		return -1
	case rank > left:
		return rank - 1
	}
	return rank
}

// current maps the rank an executor's requests and its output lines name
// (the one its process started with) to the one it holds now; -1 for a
// process the job went on without.
func (o *observer) current(started int) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if now, ok := o.rankNow[started]; ok {
		return now
	}
	return started
}

// progress records what changed in the ranks since the last call.
func (o *observer) progress(now time.Time, ranks []rankProgress) {
	o.mu.Lock()
	stale := now.Before(o.renumbered)
	o.mu.Unlock()
	if stale {
		return // taken under the ranks' old numbers; the next tick has the new ones
	}
	for _, r := range ranks {
		seen, known := o.ranks[r.rank]
		state, msg := jobview.RankRunning, ""
		switch {
		case r.exited:
			state = jobview.RankFinished
		case r.localizing != nil:
			state, msg = jobview.RankLocalizing, localizingMessage(r.localizing)
		}
		if !known || seen.host != r.host || seen.state != state || seen.message != msg {
			o.record(jobview.Event{Time: now, Kind: jobview.KindExecutor, Rank: r.rank, Role: string(r.role),
				RoleRank: r.roleNum, Host: r.host, State: state, Message: msg})
			seen.host, seen.state, seen.message = r.host, state, msg
		}
		o.mu.Lock()
		usage := o.usage[r.rank]
		o.roles[r.rank] = string(r.role)
		o.mu.Unlock()
		// What the training process consumed, not the executor's read-ahead.
		rows, batches := r.takenRows, r.takenBatches
		if !known || seen.rows != rows || seen.batches != batches || seen.bytes != r.bytes || seen.epoch != r.epoch || seen.usage != usage {
			o.record(jobview.Event{Time: now, Kind: jobview.KindProgress, Rank: r.rank,
				Progress: &jobview.Progress{Epoch: int64(r.epoch), Rows: rows, Batches: batches, Bytes: r.bytes,
					Steps: usage.steps, CPUSeconds: usage.cpuSeconds, MemoryBytes: usage.memoryBytes,
					GPUs: usage.gpus, GPUUtilRatio: usage.gpuUtil, GPUMemoryBytes: usage.gpuMemoryBytes}})
			seen.rows, seen.batches, seen.bytes, seen.epoch, seen.usage = rows, batches, r.bytes, r.epoch, usage
		}
		o.ranks[r.rank] = seen
	}
}

// localizingMessage is a localizing rank's message on the job's page and
// in spindle status: "localizing: 1048576 of 31457280 bytes", or only the
// bytes read when their total is not known (a pipe, a growing file).
func localizingMessage(l *driverpb.Localizing) string {
	if l.GetTotalBytes() < l.GetDoneBytes() || l.GetTotalBytes() == 0 {
		return fmt.Sprintf("localizing: %d bytes", l.GetDoneBytes())
	}
	return fmt.Sprintf("localizing: %d of %d bytes", l.GetDoneBytes(), l.GetTotalBytes())
}

// end records how the job ended, publishes the event log and stops the UI.
func (o *observer) end(err error) {
	state, reason := jobview.StateSucceeded, ""
	switch {
	case err == nil:
	case errors.Is(err, ErrInterrupted):
		state, reason = jobview.StateKilled, err.Error()
	default:
		state, reason = jobview.StateFailed, err.Error()
	}
	o.record(jobview.Event{Kind: jobview.KindJobState, State: state, Reason: reason})
	if o.trace != nil {
		if err := o.trace.Close(); err != nil {
			o.logger.Warn("timeline not written", "err", err)
		} else if o.console != nil {
			o.console.Eprintln("timeline written to " + o.trace.path + " (open it in Perfetto or chrome://tracing)")
		}
	}
	flush := cmp.Or(o.flush, DefaultFlushTimeout)
	if o.tb != nil {
		ctx, cancel := context.WithTimeout(context.Background(), flush)
		if err := o.tb.Close(ctx); err != nil {
			o.logger.Warn("tensorboard events not finished", "err", err)
		}
		cancel()
	}
	if o.events != nil {
		ctx, cancel := context.WithTimeout(context.Background(), flush)
		if err := o.events.Close(ctx); err != nil {
			o.logger.Warn("event log not finished", "err", err)
		}
		cancel()
	}
	o.cancel()
	if o.ui != nil {
		<-o.uiDone
	}
}

// isAddrInUse reports whether a listen failed because the port is taken.
func isAddrInUse(err error) bool { return errors.Is(err, syscall.EADDRINUSE) }
