package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/spindle-ml/spindle/standalone/internal/apierr"
	"github.com/spindle-ml/spindle/standalone/internal/secure"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"

	"github.com/spindle-ml/spindle/internal/rpc"
)

func isDeadline(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.DeadlineExceeded
}

// MasterStatus is one master as seen by asking it directly.
type MasterStatus struct {
	Peer *pb.MasterPeer
	// Info is the master's own report; nil when it did not answer.
	Info *pb.MasterInfoResponse
	Err  error
}

// Status is the cluster as an admin sees it.
type Status struct {
	Masters []MasterStatus
	Cluster *pb.ClusterStatusResponse
}

// Status asks any master for the cluster state, then every master of the
// Raft group for its own view (role, term, indexes), so masters that are
// down show up as such.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	cs, err := c.anyStatus(ctx)
	if err != nil {
		return nil, err
	}
	// A follower's replica may trail the leader's by a heartbeat, and only
	// the leader knows which applications wait for room and which
	// executors localize: prefer the leader's answer when it can be had,
	// waiting out an election (no master leads) for up to LeaderWait.
	deadline := time.Now().Add(c.cfg.LeaderWait)
election:
	for cs.GetServedBy().GetState() != "Leader" {
		if fresh := c.leaderStatus(ctx, cs); fresh != nil {
			cs = fresh
			break
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			break election // the follower's view, as it is
		case <-time.After(100 * time.Millisecond):
		}
		if again, err := c.anyStatus(ctx); err == nil {
			cs = again
		}
	}
	st := &Status{Cluster: cs, Masters: make([]MasterStatus, len(cs.GetMasters()))}
	var wg sync.WaitGroup
	for i, p := range cs.GetMasters() {
		st.Masters[i].Peer = p
		if p.GetAddr() == "" {
			st.Masters[i].Err = fmt.Errorf("no gRPC address known for master %s", p.GetId())
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st.Masters[i].Info, st.Masters[i].Err = c.masterInfo(ctx, p.GetAddr())
		}()
	}
	wg.Wait()
	return st, nil
}

// anyStatus asks any master for the cluster state.
func (c *Client) anyStatus(ctx context.Context) (*pb.ClusterStatusResponse, error) {
	var cs *pb.ClusterStatusResponse
	err := c.Call(ctx, false, func(ctx context.Context, m pb.MasterClient) error {
		resp, err := m.ClusterStatus(ctx, &pb.ClusterStatusRequest{})
		if err != nil {
			return err
		}
		cs = resp
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cluster status: %w", err)
	}
	return cs, nil
}

// leaderStatus asks the master cs names as leader for the cluster state;
// nil when cs names none or it does not answer.
func (c *Client) leaderStatus(ctx context.Context, cs *pb.ClusterStatusResponse) *pb.ClusterStatusResponse {
	for _, p := range cs.GetMasters() {
		if p.GetLeader() && p.GetAddr() != "" {
			if fresh, err := c.statusFrom(ctx, p.GetAddr()); err == nil && fresh.GetServedBy().GetState() == "Leader" {
				return fresh
			}
		}
	}
	return nil
}

// statusFrom asks the master at addr for the cluster state.
func (c *Client) statusFrom(ctx context.Context, addr string) (*pb.ClusterStatusResponse, error) {
	conn, err := rpc.NewClient(addr, rpc.ClientConfig{Options: c.creds.DialOptionsTo(secure.MasterAudience(addr))})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, min(c.cfg.AttemptTimeout, 2*time.Second))
	defer cancel()
	return pb.NewMasterClient(conn).ClusterStatus(ctx, &pb.ClusterStatusRequest{})
}

// masterInfo asks the master at addr about itself.
func (c *Client) masterInfo(ctx context.Context, addr string) (*pb.MasterInfoResponse, error) {
	conn, err := rpc.NewClient(addr, rpc.ClientConfig{Options: c.creds.DialOptionsTo(secure.MasterAudience(addr))})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, min(c.cfg.AttemptTimeout, 2*time.Second))
	defer cancel()
	info, err := pb.NewMasterClient(conn).MasterInfo(ctx, &pb.MasterInfoRequest{})
	return info, apierr.FromStatus(err)
}

// Leader returns the id of the master the reachable masters agree leads,
// or "" when none does.
func (s *Status) Leader() string {
	for _, m := range s.Masters {
		if m.Info != nil && m.Info.GetState() == "Leader" {
			return m.Info.GetId()
		}
	}
	return ""
}

// WriteText prints the status as tables: masters, workers, applications
// and executors.
func (s *Status) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MASTER\tADDRESS\tRAFT ADDRESS\tROLE\tTERM\tAPPLIED\tLAST CONTACT\tQUEUED GANGS")
	for _, m := range s.Masters {
		role, term, applied, contact, queued := "unreachable", "-", "-", "-", "-"
		if m.Info != nil {
			queued = fmt.Sprint(m.Info.GetQueuedGangs())
			role = strings.ToLower(m.Info.GetState())
			term = fmt.Sprint(m.Info.GetTerm())
			applied = fmt.Sprint(m.Info.GetAppliedIndex())
			if role != "leader" {
				contact = (time.Duration(m.Info.GetLastContactMs()) * time.Millisecond).String() + " ago"
			}
		} else if m.Err != nil && status.Code(m.Err) != codes.Unavailable && status.Code(m.Err) != codes.DeadlineExceeded {
			role = "error: " + firstLine(m.Err.Error())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Peer.GetId(), m.Peer.GetAddr(), m.Peer.GetRaftAddr(), role, term, applied, contact, queued)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "WORKER\tADDRESS\tSTATE\tCORES\tMEMORY\tGPUS\tEXECUTORS\tMESSAGE")
	for _, wk := range s.Cluster.GetWorkers() {
		state := "alive"
		if !wk.GetAlive() {
			state = "lost"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%d/%d MiB\t%d/%d\t%d\t%s\n", wk.GetId(), wk.GetAddr(), state,
			wk.GetUsedCores(), wk.GetCores(), wk.GetUsedMemoryMb(), wk.GetMemoryMb(), wk.GetUsedGpus(), wk.GetGpus(), wk.GetExecutors(),
			firstLine(wk.GetMessage()))
	}
	if len(s.Cluster.GetWorkers()) == 0 {
		fmt.Fprintln(tw, "(no workers registered)")
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "APPLICATION\tNAME\tSTATE\tSUBMITTED\tDRIVER\tMESSAGE")
	apps := append([]*pb.AppInfo(nil), s.Cluster.GetApps()...)
	sort.SliceStable(apps, func(i, j int) bool { return apps[i].GetSubmittedUnixMs() > apps[j].GetSubmittedUnixMs() })
	for _, a := range apps {
		msg := a.GetMessage()
		switch a.Outcome() {
		case "SUCCEEDED":
			msg = ""
		case "WAITING":
			msg = "waiting for room: need " + a.GetNeed()
		case "RUNNING":
			if in := a.GetInput(); in != "" && msg == "" {
				msg = "producers push input to " + in
			}
			if l := a.GetLocalizing(); len(l) > 0 && msg == "" {
				msg = strings.Join(l, "; ")
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.GetId(), a.GetName(), a.Outcome(),
			time.UnixMilli(a.GetSubmittedUnixMs()).Format(time.DateTime), a.GetDriverHost(), firstLine(msg))
	}
	if len(apps) == 0 {
		fmt.Fprintln(tw, "(no applications)")
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "EXECUTOR\tAPPLICATION\tROLE\tWORKER\tSTATE\tRESOURCES\tMESSAGE")
	for _, e := range s.Cluster.GetExecutors() {
		res := fmt.Sprintf("%d core%s/%d MiB", e.GetCores(), plural(int(e.GetCores())), e.GetMemoryMb())
		if len(e.GetGpus()) > 0 {
			res += fmt.Sprintf("/GPUs %v", e.GetGpus())
		}
		state := ExecutorStateName(e.GetState())
		if e.GetState() == pb.ExecutorState_EXECUTOR_STATE_EXITED {
			state += fmt.Sprintf(" (%d)", e.GetExitCode())
		}
		role := e.GetRole()
		if role == "" {
			role = "worker"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.GetId(), e.GetAppId(), role, e.GetWorkerId(), state, res, firstLine(e.GetMessage()))
	}
	if len(s.Cluster.GetExecutors()) == 0 {
		fmt.Fprintln(tw, "(no executors)")
	}
	return tw.Flush()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// AppStateName returns a lower-case name for an application state.
func AppStateName(s pb.AppState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "APP_STATE_"))
}

// ExecutorStateName returns a lower-case name for an executor state.
func ExecutorStateName(s pb.ExecutorState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "EXECUTOR_STATE_"))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// Only keeps the applications that app names (an id or name; empty: all)
// and, with running, that have not ended, with their executors.
func (s *Status) Only(app string, running bool) *Status {
	out := &Status{Masters: s.Masters, Cluster: &pb.ClusterStatusResponse{Workers: s.Cluster.GetWorkers()}}
	keep := map[string]bool{}
	for _, a := range s.Cluster.GetApps() {
		if (app == "" || a.GetId() == app || a.GetName() == app) && (!running || a.GetState() == pb.AppState_APP_STATE_RUNNING) {
			keep[a.GetId()] = true
			out.Cluster.Apps = append(out.Cluster.Apps, a)
		}
	}
	for _, e := range s.Cluster.GetExecutors() {
		if keep[e.GetAppId()] {
			out.Cluster.Executors = append(out.Cluster.Executors, e)
		}
	}
	return out
}

// WriteJSON writes the status as one JSON object for scripts: masters
// (with their role, or the error that hid it), workers, applications
// (state, outcome: RUNNING, WAITING, SUCCEEDED, FAILED, KILLED) and
// executors, in the API's field names.
func (s *Status) WriteJSON(w io.Writer) error {
	type master struct {
		ID    string          `json:"id"`
		Addr  string          `json:"addr"`
		Info  json.RawMessage `json:"info,omitempty"`
		Error string          `json:"error,omitempty"`
	}
	out := struct {
		Masters   []master          `json:"masters"`
		Workers   []json.RawMessage `json:"workers"`
		Apps      []json.RawMessage `json:"applications"`
		Executors []json.RawMessage `json:"executors"`
	}{Workers: []json.RawMessage{}, Apps: []json.RawMessage{}, Executors: []json.RawMessage{}}
	enc := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}
	for _, m := range s.Masters {
		mm := master{ID: m.Peer.GetId(), Addr: m.Peer.GetAddr()}
		if m.Info != nil {
			mm.Info, _ = enc.Marshal(m.Info)
		} else if m.Err != nil {
			mm.Error = m.Err.Error()
		}
		out.Masters = append(out.Masters, mm)
	}
	for _, wk := range s.Cluster.GetWorkers() {
		b, _ := enc.Marshal(wk)
		out.Workers = append(out.Workers, b)
	}
	for _, a := range s.Cluster.GetApps() {
		b, _ := enc.Marshal(a)
		// The outcome is derived, not a field: add it.
		var m map[string]any
		if json.Unmarshal(b, &m) == nil {
			m["outcome"] = a.Outcome()
			b, _ = json.Marshal(m)
		}
		out.Apps = append(out.Apps, b)
	}
	for _, e := range s.Cluster.GetExecutors() {
		b, _ := enc.Marshal(e)
		out.Executors = append(out.Executors, b)
	}
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(out)
}

// deadlineNear says whether ctx's deadline has passed or all but passed:
// gRPC fails a call with DeadlineExceeded by the clock, which on a busy
// machine can come before ctx's timer fires and sets ctx.Err.
func deadlineNear(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && time.Until(d) < deadlineSlack
}

// deadlineSlack is how close to ctx's deadline deadlineNear looks.
const deadlineSlack = 100 * time.Millisecond
