package yarn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"time"

	krbclient "github.com/jcmturner/gokrb5/v8/client"
	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/fsys"
	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/yarn/client"
)

// gateway is what both deploy modes do on the submitting machine: read the
// Hadoop client configuration, talk to the ResourceManager, stage files
// and submit the ApplicationMaster.
type gateway struct {
	cfg      Config
	conf     *client.Conf
	sec      client.Security
	login    *krbclient.Client // the Kerberos login, on a Kerberized cluster
	rm       *client.Client
	resolver *fsys.Resolver
	log      *slog.Logger
	out      io.Writer
}

// newGateway reads the Hadoop configuration and checks that a
// ResourceManager answers. Configuration errors wrap ErrConfig; a
// ResourceManager that does not answer is ErrUnreachable, naming its
// addresses.
func newGateway(ctx context.Context, cfg Config) (*gateway, error) {
	def := DefaultConfig()
	cfg.Timeouts = cfg.Timeouts.withDefaults()
	if cfg.AppName == "" {
		cfg.AppName = def.AppName
	}
	if cfg.Queue == "" {
		cfg.Queue = def.Queue
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	conf, err := client.LoadConf(cfg.HadoopConfDir)
	if err != nil {
		return nil, err
	}
	sec, login, rmUser, err := loginFor(conf, &cfg)
	if err != nil {
		return nil, err
	}
	rms, err := conf.RMAddrs()
	if err != nil {
		destroy(login)
		return nil, err
	}
	if _, err := conf.SchedulerAddrs(); err != nil {
		destroy(login)
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rmCfg := client.Config{RMAddrs: rms, User: rmUser, Rounds: 2, Logger: log}
	if login != nil {
		rmCfg.SASL = sec.RMAuth(login)
	}
	rm, err := client.New(rmCfg)
	if err != nil {
		destroy(login)
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, cfg.Timeouts.Connect)
	defer cancel()
	m, err := rm.ClusterMetrics(cctx)
	if err != nil {
		rm.Close()
		destroy(login)
		if errors.Is(err, hadooprpc.ErrProtection) {
			err = fmt.Errorf("%w: %v", ErrConfig, err)
		}
		return nil, err
	}
	out := cfg.Out
	if out == nil {
		out = os.Stderr
	}
	g := &gateway{
		cfg: cfg, conf: conf, sec: sec, login: login, rm: rm, log: log.With("component", "yarn"), out: out,
		resolver: fsys.NewResolver(fsys.Options{HadoopConfDir: conf.Dir, User: cfg.User,
			KerberosPrincipal: cfg.KerberosPrincipal, KerberosKeytab: cfg.KerberosKeytab}),
	}
	g.log.Info("connected to the resourcemanager", "addr", rm.Addr(), "nodemanagers", m.GetNumActiveNms())
	return g, nil
}

// close closes the gateway's connections.
func (g *gateway) close() {
	g.resolver.Close()
	g.rm.Close()
	destroy(g.login)
}

// newApp asks for an application id and checks that containers of
// needMB MiB fit YARN's largest; it creates the staging directory.
func (g *gateway) newApp(ctx context.Context, check func(maxMB int64) error) (client.AppID, *stager, error) {
	res, err := g.reserveApp(ctx)
	if err != nil {
		return res.id, nil, err
	}
	return g.stageApp(ctx, res, check)
}

// appReservation is an application id the ResourceManager handed out,
// with the largest container it allows, not yet submitted.
type appReservation struct {
	id    client.AppID
	maxMB int64
}

// reserveApp asks the ResourceManager for a new application id.
func (g *gateway) reserveApp(ctx context.Context) (appReservation, error) {
	id, maxCap, err := g.rm.NewApplication(ctx)
	if err != nil {
		return appReservation{id: id}, err
	}
	return appReservation{id: id, maxMB: maxCap.GetMemory()}, nil
}

// stageApp checks that containers of the reserved application fit and
// makes its staging directory.
func (g *gateway) stageApp(ctx context.Context, res appReservation, check func(maxMB int64) error) (client.AppID, *stager, error) {
	id := res.id
	if err := check(res.maxMB); err != nil {
		return id, nil, err
	}
	st, err := newStager(ctx, g.resolver, g.conf.Get("fs.defaultFS", ""), g.cfg.User, id.String())
	if err != nil {
		return id, nil, err
	}
	return id, st, nil
}

// stageBinary stages the spindle binary (this one unless the
// configuration names another).
func (g *gateway) stageBinary(ctx context.Context, st *stager) (Resource, error) {
	bin := g.cfg.Binary
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return Resource{}, fmt.Errorf("find the spindle binary to stage: %w", err)
		}
	}
	start := time.Now()
	if c := newBinaryCache(st, g.cfg.BinaryCache, g.cfg.User, g.cfg.BinaryCacheKeep, g.log); c != nil {
		res, err := g.stageCached(ctx, c, st, bin, start)
		if err == nil || ctx.Err() != nil {
			return res, err
		}
		g.log.Warn("binary cache unusable: staging the binary with the application", "dir", st.uri(c.dir), "err", err)
	}
	res, err := st.put(ctx, bin, "spindle")
	if err != nil {
		return Resource{}, err
	}
	// Staging can take minutes (a large binary, encrypted data transfer
	// on a busy gateway) and counts against the gang's wait: say so.
	g.log.Info("staged the spindle binary", "file", res.File, "bytes", res.Size, "after", time.Since(start).Round(time.Millisecond))
	return res, nil
}

// stageCached stages bin through the binary cache c.
func (g *gateway) stageCached(ctx context.Context, c *binaryCache, st *stager, bin string, start time.Time) (Resource, error) {
	lb, err := hashBinary(bin)
	if err != nil {
		return Resource{}, err
	}
	res, uploaded, err := c.stage(ctx, st, lb)
	if err != nil {
		return Resource{}, err
	}
	msg := MsgBinaryCached
	if uploaded {
		msg = MsgBinaryUploaded
	}
	g.log.Info(msg, "file", st.uri(res.File), "bytes", res.Size, "after", time.Since(start).Round(time.Millisecond))
	return res, nil
}

// racks maps the running NodeManagers' hosts to their racks; empty when
// the ResourceManager does not say (locality then asks for nodes only).
func (g *gateway) racks(ctx context.Context) map[string]string {
	nodes, err := g.rm.Nodes(ctx)
	if err != nil {
		g.log.Warn("no node list for locality", "err", err)
		return nil
	}
	out := map[string]string{}
	for _, n := range nodes {
		out[n.GetNodeId().GetHost()] = n.GetRackName()
	}
	return out
}

// launch submits the application with its ApplicationMaster's launch
// context: the staged binary and plan.AMFiles localized, the plan and
// tokens (HDFS delegation tokens, by service) in the credentials, nothing
// secret in the environment or command line.
func (g *gateway) launch(ctx context.Context, id client.AppID, plan Plan, tokens map[string]hadooprpc.Token, secrets map[string][]byte) error {
	sched, _ := g.conf.SchedulerAddrs()
	plan.SchedulerAddrs = sched
	plan.RPCProtection = g.sec.Protection
	plan.MaxAttempts = g.cfg.MaxAttempts
	clc, err := amLaunchContext(plan, g.cfg.LogLevel, tokens, secrets)
	if err != nil {
		return err
	}
	sc := &pb.ApplicationSubmissionContextProto{
		ApplicationId: id.Proto(), ApplicationName: proto.String(g.cfg.AppName), Queue: proto.String(g.cfg.Queue),
		Priority:        &pb.PriorityProto{Priority: proto.Int32(int32(g.cfg.Priority))},
		AmContainerSpec: clc,
		MaxAppAttempts:  proto.Int32(int32(g.cfg.MaxAttempts)),
		Resource:        &pb.ResourceProto{Memory: proto.Int64(int64(g.cfg.AMMemoryMB)), VirtualCores: proto.Int32(int32(g.cfg.AMCores))},
		ApplicationType: proto.String(ApplicationType),
		ApplicationTags: g.cfg.Tags,
	}
	if err := g.rm.Submit(ctx, sc); err != nil {
		return err
	}
	fmt.Fprintf(g.out, "yarn application %s submitted to queue %s\n", id, g.cfg.Queue)
	return nil
}

// amLaunchContext is the ApplicationMaster's launch context: the staged
// binary and plan.AMFiles localized, the plan (with the job's settings,
// environment and secrets) in the credentials, nothing secret in the
// environment or command line, which YARN writes into a launch script and
// shows in its web UI. secrets are further secrets of the AM's
// credentials (a cluster-mode driver's keytab login).
func amLaunchContext(plan Plan, logLevel string, tokens map[string]hadooprpc.Token, secrets map[string][]byte) (*pb.ContainerLaunchContextProto, error) {
	creds := hadooprpc.NewCredentials()
	if err := plan.addTo(creds); err != nil {
		return nil, err
	}
	for alias, v := range secrets {
		creds.Secrets[alias] = v
	}
	for alias, t := range tokens {
		creds.Tokens[alias] = t
	}
	marshalled, err := creds.Marshal(hadooprpc.CredentialsWritable)
	if err != nil {
		return nil, err
	}
	local := []*pb.StringLocalResourceMapProto{{Key: proto.String("spindle"), Value: plan.Spindle.Proto()}}
	names := make([]string, 0, len(plan.AMFiles))
	for name := range plan.AMFiles {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		local = append(local, &pb.StringLocalResourceMapProto{Key: proto.String(name), Value: plan.AMFiles[name].Proto()})
	}
	return &pb.ContainerLaunchContextProto{
		LocalResources: local,
		Tokens:         marshalled,
		Environment:    []*pb.StringStringMapProto{{Key: proto.String("SPINDLE_LOG_LEVEL"), Value: proto.String(logLevel)}},
		Command:        []string{"./spindle yarn-am 1><LOG_DIR>/stdout 2><LOG_DIR>/stderr"},
	}, nil
}

// waitFinal polls until the application is in a final state and returns
// its last report (nil when it did not end within the time).
func (g *gateway) waitFinal(ctx context.Context, id client.AppID, within time.Duration) *pb.ApplicationReportProto {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		r, err := g.rm.Report(ctx, id)
		if err == nil && client.IsFinal(r.GetYarnApplicationState()) {
			return r
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}
