package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"google.golang.org/protobuf/proto"
)

// ProtocolName is ApplicationClientProtocol's name on the wire.
const ProtocolName = "org.apache.hadoop.yarn.api.ApplicationClientProtocolPB"

// ErrUnreachable reports ResourceManagers that did not answer.
var ErrUnreachable = errors.New("yarn: ResourceManager unreachable")

// Config says how to reach the ResourceManager.
type Config struct {
	// RMAddrs are the ResourceManagers' client addresses, every one of an
	// HA group.
	RMAddrs []string
	// User submits applications: the user of simple authentication, or
	// the principal of a Kerberos login.
	User string
	// SASL authenticates to the ResourceManagers; nil is simple
	// authentication. On a Kerberized cluster: Security.RMAuth.
	SASL hadooprpc.ClientSASL
	// Rounds bounds the passes over RMAddrs per call; zero means 3.
	Rounds int
	Logger *slog.Logger
}

// Client calls ApplicationClientProtocol on the active ResourceManager.
type Client struct {
	cfg Config
	rpc *hadooprpc.FailoverClient
	log *slog.Logger
}

// New returns a client; it connects on the first call.
func New(cfg Config) (*Client, error) {
	if cfg.User == "" {
		return nil, errors.New("yarn client: no user")
	}
	f, err := hadooprpc.NewFailoverClient(hadooprpc.FailoverConfig{
		Addrs:  cfg.RMAddrs,
		Client: hadooprpc.ClientConfig{User: cfg.User, Protocol: ProtocolName, SASL: cfg.SASL},
		Rounds: cfg.Rounds,
	})
	if err != nil {
		return nil, fmt.Errorf("yarn client: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{cfg: cfg, rpc: f, log: log.With("component", "yarn-client")}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.rpc.Close() }

// Addr returns the ResourceManager last used.
func (c *Client) Addr() string { return c.rpc.Current() }

func (c *Client) call(ctx context.Context, method string, req, resp proto.Message) error {
	err := c.rpc.Call(ctx, method, req, resp)
	if errors.Is(err, hadooprpc.ErrNoServer) {
		return fmt.Errorf("%w at %s: %w", ErrUnreachable, strings.Join(c.cfg.RMAddrs, ", "), err)
	}
	return err
}

// NewApplication asks for a new application id; it also returns the
// largest container the cluster grants.
func (c *Client) NewApplication(ctx context.Context) (AppID, *pb.ResourceProto, error) {
	resp := &pb.GetNewApplicationResponseProto{}
	if err := c.call(ctx, "getNewApplication", &pb.GetNewApplicationRequestProto{}, resp); err != nil {
		return AppID{}, nil, fmt.Errorf("get a new application id: %w", err)
	}
	return AppIDFromProto(resp.GetApplicationId()), resp.GetMaximumCapability(), nil
}

// Submit submits an application.
func (c *Client) Submit(ctx context.Context, sc *pb.ApplicationSubmissionContextProto) error {
	req := &pb.SubmitApplicationRequestProto{ApplicationSubmissionContext: sc}
	if err := c.call(ctx, "submitApplication", req, &pb.SubmitApplicationResponseProto{}); err != nil {
		return fmt.Errorf("submit application %s: %w", AppIDFromProto(sc.GetApplicationId()), err)
	}
	return nil
}

// Report returns the application's report.
func (c *Client) Report(ctx context.Context, id AppID) (*pb.ApplicationReportProto, error) {
	resp := &pb.GetApplicationReportResponseProto{}
	if err := c.call(ctx, "getApplicationReport", &pb.GetApplicationReportRequestProto{ApplicationId: id.Proto()}, resp); err != nil {
		return nil, fmt.Errorf("report of %s: %w", id, err)
	}
	return resp.GetApplicationReport(), nil
}

// Kill asks the ResourceManager to kill the application; it reports
// whether the kill has completed.
func (c *Client) Kill(ctx context.Context, id AppID, diagnostics string) (bool, error) {
	resp := &pb.KillApplicationResponseProto{}
	req := &pb.KillApplicationRequestProto{ApplicationId: id.Proto(), Diagnostics: proto.String(diagnostics)}
	if err := c.call(ctx, "forceKillApplication", req, resp); err != nil {
		return false, fmt.Errorf("kill %s: %w", id, err)
	}
	return resp.GetIsKillCompleted(), nil
}

// ClusterMetrics returns the NodeManager counts.
func (c *Client) ClusterMetrics(ctx context.Context) (*pb.YarnClusterMetricsProto, error) {
	resp := &pb.GetClusterMetricsResponseProto{}
	if err := c.call(ctx, "getClusterMetrics", &pb.GetClusterMetricsRequestProto{}, resp); err != nil {
		return nil, fmt.Errorf("cluster metrics: %w", err)
	}
	return resp.GetClusterMetrics(), nil
}

// QueueInfo describes a queue.
func (c *Client) QueueInfo(ctx context.Context, queue string) (*pb.QueueInfoProto, error) {
	resp := &pb.GetQueueInfoResponseProto{}
	req := &pb.GetQueueInfoRequestProto{QueueName: proto.String(queue), IncludeApplications: proto.Bool(false), IncludeChildQueues: proto.Bool(false), Recursive: proto.Bool(false)}
	if err := c.call(ctx, "getQueueInfo", req, resp); err != nil {
		return nil, fmt.Errorf("queue %s: %w", queue, err)
	}
	return resp.GetQueueInfo(), nil
}

// Nodes returns the running NodeManagers.
func (c *Client) Nodes(ctx context.Context) ([]*pb.NodeReportProto, error) {
	resp := &pb.GetClusterNodesResponseProto{}
	req := &pb.GetClusterNodesRequestProto{NodeStates: []pb.NodeStateProto{pb.NodeStateProto_NS_RUNNING}}
	if err := c.call(ctx, "getClusterNodes", req, resp); err != nil {
		return nil, fmt.Errorf("cluster nodes: %w", err)
	}
	return resp.GetNodeReports(), nil
}

// Applications lists applications of type appType (all types when empty).
func (c *Client) Applications(ctx context.Context, appType string) ([]*pb.ApplicationReportProto, error) {
	req := &pb.GetApplicationsRequestProto{}
	if appType != "" {
		req.ApplicationTypes = []string{appType}
	}
	resp := &pb.GetApplicationsResponseProto{}
	if err := c.call(ctx, "getApplications", req, resp); err != nil {
		return nil, fmt.Errorf("list applications: %w", err)
	}
	return resp.GetApplications(), nil
}

// IsFinal reports whether an application state is final.
func IsFinal(s pb.YarnApplicationStateProto) bool {
	return s == pb.YarnApplicationStateProto_FINISHED || s == pb.YarnApplicationStateProto_FAILED || s == pb.YarnApplicationStateProto_KILLED
}

// QueueRoom explains what a queue can give, for refusals:
// "queue ml has 8192 MiB and 16 vcores available".
func QueueRoom(q *pb.QueueInfoProto) string {
	st := q.GetQueueStatistics()
	if st == nil {
		return fmt.Sprintf("queue %s is at %.0f%% of its capacity", q.GetQueueName(), 100*q.GetCurrentCapacity())
	}
	return fmt.Sprintf("queue %s has %d MiB and %d vcores available (%d MiB pending)", q.GetQueueName(),
		st.GetAvailableMemoryMB(), st.GetAvailableVCores(), st.GetPendingMemoryMB())
}
