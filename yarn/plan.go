package yarn

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/proto"

	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
)

// Aliases of Spindle's entries in a container's credentials.
const (
	// planAlias holds the AM's Plan (JSON).
	planAlias = "spindle.yarn.plan"
	// envAliasPrefix prefixes environment variables that must not appear
	// in a launch context (YARN writes those into launch scripts and shows
	// them in its UI): the job secret, above all.
	envAliasPrefix = "spindle.env."
)

// Resource is a file YARN localizes into a container.
type Resource struct {
	Scheme    string `json:"scheme"`
	Host      string `json:"host"`
	Port      int32  `json:"port"`
	File      string `json:"file"`
	Size      int64  `json:"size"`
	Timestamp int64  `json:"timestamp"` // modification time, ms
	// Visibility is how widely a NodeManager shares its localized copy:
	// empty is APPLICATION (one copy per application), visibilityPrivate
	// one copy per user, reused by the user's later applications while
	// the file's size and modification time stay the same.
	Visibility string `json:"visibility,omitempty"`
}

// visibilityPrivate is Resource.Visibility for a file shared by a user's
// applications: the cached spindle binary.
const visibilityPrivate = "PRIVATE"

// Proto returns the LocalResourceProto YARN wants: a file with its exact
// size and modification time, application-private unless r says PRIVATE.
func (r Resource) Proto() *pb.LocalResourceProto {
	vis := pb.LocalResourceVisibilityProto_APPLICATION
	if r.Visibility == visibilityPrivate {
		vis = pb.LocalResourceVisibilityProto_PRIVATE
	}
	return &pb.LocalResourceProto{
		Resource: &pb.URLProto{Scheme: proto.String(r.Scheme), Host: proto.String(r.Host), Port: proto.Int32(r.Port), File: proto.String(r.File)},
		Size:     proto.Int64(r.Size), Timestamp: proto.Int64(r.Timestamp),
		Type: pb.LocalResourceTypeProto_LR_FILE.Enum(), Visibility: vis.Enum(),
	}
}

// Plan is what the client tells its ApplicationMaster, inside the AM's
// credentials (never its environment).
type Plan struct {
	AppID          string            `json:"appId"`
	SchedulerAddrs []string          `json:"schedulerAddrs"`
	Spindle        Resource          `json:"spindle"`
	Env            map[string]string `json:"env"` // secret environment every executor gets
	AMSecret       string            `json:"amSecret"`
	// AMTLS, with job TLS, is the AM's TLS bundle (a CA made for the
	// application, the AM's certificate and key): the AM serves its API
	// over HTTPS and the gateway trusts that CA only.
	AMTLS         string `json:"amTls,omitempty"`
	GangTimeoutMS int64  `json:"gangTimeoutMs"`
	OverheadMB    int    `json:"memoryOverheadMb"`
	StagingURI    string `json:"stagingUri"`
	LogLevel      string `json:"logLevel"`
	// TrackingURL is the driver's web UI, which the AM registers as the
	// application's tracking URL (the ResourceManager proxies it).
	TrackingURL string `json:"trackingUrl,omitempty"`
	// AMFiles are further files YARN localizes into the AM's container,
	// by link name (the Hadoop client configuration, in cluster mode).
	AMFiles map[string]Resource `json:"amFiles,omitempty"`
	// Racks maps the cluster's NodeManager hosts to their racks, for the
	// locality of container requests.
	Racks map[string]string `json:"racks,omitempty"`
	// LocalityWaitMS is how long a container request stays on its
	// preferred nodes, then on their racks, before it takes any node.
	LocalityWaitMS int64 `json:"localityWaitMs,omitempty"`
	// MaxAttempts is the application's maxAppAttempts.
	MaxAttempts int `json:"maxAttempts,omitempty"`
	// Cluster, in cluster mode, is the job whose driver the AM runs.
	Cluster *ClusterJob `json:"cluster,omitempty"`
	// RPCProtection is the gateway's hadoop.rpc.protection, for the AM's
	// token connections to the ResourceManager and NodeManagers.
	RPCProtection string `json:"rpcProtection,omitempty"`
}

// ClusterJob is a cluster-mode job as the gateway hands it to the
// ApplicationMaster: the configuration and what a submit gives beyond keys.
// Local files have already been staged and are named by their hdfs:// URIs.
type ClusterJob struct {
	// Settings are the job's configuration keys given above the built-in
	// defaults, as key=value.
	Settings []string          `json:"settings"`
	Inputs   []string          `json:"inputs,omitempty"`
	Command  []string          `json:"command"`
	Env      map[string]string `json:"env,omitempty"`
	Files    []string          `json:"files,omitempty"`
	PyFiles  []string          `json:"pyFiles,omitempty"`
	Archives []string          `json:"archives,omitempty"`
	// Executors are the memory the job's kinds of executors ask for, so
	// that the gateway refuses what YARN can never give before submitting.
	Executors []ExecutorMemory `json:"-"`
}

// ExecutorMemory is the memory one kind of executor asks for.
type ExecutorMemory struct {
	Role     string // "worker", "parameter server"
	Key      string // the key or flag that sets it
	MemoryMB int
	// SharedMemoryMB is what it shares with its training process
	// (driver.ExecutorSpec.SharedMemoryMB).
	SharedMemoryMB int
}

// credentials returns c with the plan added as a secret.
func (p Plan) addTo(c *hadooprpc.Credentials) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	c.Secrets[planAlias] = b
	return nil
}

// planFrom reads the plan from credentials.
func planFrom(c *hadooprpc.Credentials) (Plan, error) {
	var p Plan
	b, ok := c.Secrets[planAlias]
	if !ok {
		return p, fmt.Errorf("the container's credentials hold no %s: was this container started by spindle submit?", planAlias)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("parse %s: %w", planAlias, err)
	}
	return p, nil
}

// envCredentials carries environment variables as credential secrets,
// beside tokens (the job's HDFS delegation tokens).
func envCredentials(env map[string]string, tokens map[string]hadooprpc.Token) ([]byte, error) {
	c := hadooprpc.NewCredentials()
	for k, v := range env {
		c.Secrets[envAliasPrefix+k] = []byte(v)
	}
	for alias, t := range tokens {
		c.Tokens[alias] = t
	}
	return c.Marshal(hadooprpc.CredentialsWritable)
}
