package am

import (
	"context"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/spindle-ml/spindle/driver"
	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/yarn/client"
)

// launchers bounds the NodeManagers the AM starts containers on at once.
const launchers = 32

// startAll starts every held container, with one startContainers call per
// NodeManager for all of its containers (a gang of thousands is a few
// hundred calls, each a connection and an authentication), on up to
// launchers nodes at once; if one fails, the others are stopped and
// every container released.
func (a *Allocator) startAll(ctx context.Context, cs []*container) error {
	byNode := map[string][]*container{}
	var nodes []string
	for _, c := range cs {
		node := nodeAddr(c.c.GetNodeId())
		if byNode[node] == nil {
			nodes = append(nodes, node)
		}
		byNode[node] = append(byNode[node], c)
	}
	var g errgroup.Group
	g.SetLimit(launchers)
	for _, node := range nodes {
		g.Go(func() error { return a.startOn(ctx, node, byNode[node]) })
	}
	if err := g.Wait(); err != nil {
		ids := make([]string, len(cs))
		for i, c := range cs {
			ids[i] = c.spec.ID
		}
		rctx, cancel := context.WithTimeout(context.Background(), a.cfg.RMCallTimeout)
		defer cancel()
		a.Release(rctx, ids)
		return err
	}
	a.log.Info("containers started", "executors", len(cs), "nodes", len(nodes))
	for _, c := range cs {
		a.emit(driver.Event{ExecutorID: c.spec.ID, Kind: driver.ExecutorStarted, Host: c.host,
			Message: "container " + client.ContainerString(c.c.GetId()), Time: time.Now()})
	}
	return nil
}

// startOn starts containers cs on NodeManager node in one call.
func (a *Allocator) startOn(ctx context.Context, node string, cs []*container) error {
	req := &pb.StartContainersRequestProto{}
	byID := make(map[string]*container, len(cs))
	for _, c := range cs {
		clc, err := a.cfg.LaunchContext(c.spec)
		if err != nil {
			return fmt.Errorf("launch context of executor %s: %w", c.spec.ID, err)
		}
		req.StartContainerRequest = append(req.StartContainerRequest, &pb.StartContainerRequestProto{
			ContainerLaunchContext: clc, ContainerToken: c.c.GetContainerToken(),
		})
		byID[client.ContainerString(c.c.GetId())] = c
	}
	a.mu.Lock()
	tok, ok := a.nmTokens[node]
	a.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: no NMToken for node %s (executor %s)", ErrLaunch, node, executors(cs))
	}
	resp := &pb.StartContainersResponseProto{}
	if err := nmCall(ctx, node, tok, a.cfg.RPCProtection, a.cfg.NMCallTimeout, "startContainers", req, resp); err != nil {
		return fmt.Errorf("%w: executor %s on %s: %v", ErrLaunch, executors(cs), node, err)
	}
	a.mu.Lock()
	for _, id := range resp.GetSucceededRequests() {
		if c := byID[client.ContainerString(id)]; c != nil {
			c.started = true
		}
	}
	a.mu.Unlock()
	if failed := resp.GetFailedRequests(); len(failed) > 0 {
		// The first failure names the node's trouble; the rest repeat it.
		f := failed[0]
		who := "of container " + client.ContainerString(f.GetContainerId())
		if c := byID[client.ContainerString(f.GetContainerId())]; c != nil {
			who = c.spec.ID
		}
		return fmt.Errorf("%w: executor %s on %s: %s: %s", ErrLaunch, who, node, f.GetException().GetClassName(), f.GetException().GetMessage())
	}
	a.log.Debug("containers started on a node", "node", node, "executors", executors(cs))
	return nil
}

// executors names the executors of cs for messages: the first three and
// how many more.
func executors(cs []*container) string {
	ids := make([]string, 0, 3)
	for _, c := range cs[:min(len(cs), 3)] {
		ids = append(ids, c.spec.ID)
	}
	s := strings.Join(ids, ", ")
	if len(cs) > 3 {
		s += fmt.Sprintf(" and %d more", len(cs)-3)
	}
	return s
}
