package fsys

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/user"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/colinmarc/hdfs/v2"
	"github.com/colinmarc/hdfs/v2/hadoopconf"
	krbclient "github.com/jcmturner/gokrb5/v8/client"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/internal/hadoop/kerberos"
)

// ErrNamenodeUnreachable reports an HDFS cluster whose namenodes did not
// answer within the connection attempts.
var ErrNamenodeUnreachable = errors.New("fsys: namenode unreachable")

// ErrHadoopConfig reports a Hadoop configuration that does not say how to
// reach a cluster.
var ErrHadoopConfig = errors.New("fsys: bad Hadoop configuration")

const (
	// hdfsDefaultPort is the namenode RPC port of an authority without one.
	hdfsDefaultPort = "8020"
	// hdfsConnectAttempts bounds the tries to reach a namenode at start.
	hdfsConnectAttempts = 4
	// hdfsRetryBackoff is the wait after the first failed attempt; it doubles.
	hdfsRetryBackoff = 200 * time.Millisecond
)

// hdfsCluster is what Hadoop configuration says about one cluster.
type hdfsCluster struct {
	authority string   // as written in URIs (a host:port or a nameservice)
	addrs     []string // namenode RPC addresses
	user      string
	options   hdfs.ClientOptions
	nnConns   *connSet // namenode connections, cut short when a call's context ends

	logical     bool                 // authority is an HA nameservice
	protection  string               // hadoop.rpc.protection
	auth        hadooprpc.ClientSASL // nil: simple authentication
	krb         *krbclient.Client    // the Kerberos login, when auth uses it
	tokens      *tokenFile           // the delegation token in use, when auth is TOKEN
	maxIdle     time.Duration        // ipc.client.connection.maxidletime
	ioTimeout   time.Duration        // Options.HDFSIOTimeout
	dialTimeout time.Duration        // Options.HDFSDialTimeout

	// refused holds the last namenode connection refused for want of a
	// common hadoop.rpc.protection, which colinmarc/hdfs reports as text:
	// a configuration error, not worth retrying.
	refused atomic.Pointer[error]
	// dnRefused holds the last datanode connection refused for want of a
	// common dfs.data.transfer.protection, added to errors colinmarc/hdfs
	// reports without it (a write's "replication in progress").
	dnRefused atomic.Pointer[error]
	// dnFails names the datanodes that failed a read, for its error.
	dnFails dnFailures
}

// connSet tracks open connections so that calls blocked on them (the HDFS
// client takes no context) can be cut short: a deadline in the past makes
// a blocked read return at once.
type connSet struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// dialFunc returns a dial function that tracks what it dials.
func (s *connSet) dialFunc(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, set: s}
		s.mu.Lock()
		s.conns[tc] = struct{}{}
		s.mu.Unlock()
		return tc, nil
	}
}

// interrupt makes every blocked call on the set's connections return.
func (s *connSet) interrupt() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		_ = c.SetDeadline(time.Unix(1, 0))
	}
}

// watch interrupts the set's connections if ctx ends before the returned
// function is called.
func (s *connSet) watch(ctx context.Context) (stop func() bool) {
	return context.AfterFunc(ctx, s.interrupt)
}

type trackedConn struct {
	net.Conn
	set *connSet
}

func (c *trackedConn) Close() error {
	c.set.mu.Lock()
	delete(c.set.conns, c)
	c.set.mu.Unlock()
	return c.Conn.Close()
}

// openHDFS connects to the HDFS cluster named by authority (empty for
// fs.defaultFS).
func openHDFS(ctx context.Context, authority string, opts Options) (FS, error) {
	cl, err := hdfsClusterFor(authority, opts)
	if err != nil {
		return nil, err
	}
	h, err := dialHDFS(ctx, cl)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// hdfsClusterFor resolves authority, the Hadoop configuration and the user
// into client options.
func hdfsClusterFor(authority string, opts Options) (*hdfsCluster, error) {
	dir := opts.HadoopConfDir
	if dir == "" {
		dir = os.Getenv("HADOOP_CONF_DIR")
	}
	var conf hadoopconf.HadoopConf
	if dir != "" {
		var err error
		if conf, err = hadoopconf.Load(dir); err != nil {
			return nil, fmt.Errorf("%w: load %s: %v", ErrHadoopConfig, dir, err)
		}
	}
	where := "HADOOP_CONF_DIR is not set"
	if dir != "" {
		where = "in " + dir
	}
	if authority == "" {
		def := conf["fs.defaultFS"]
		if def == "" {
			def = conf["fs.default.name"]
		}
		if def == "" {
			return nil, fmt.Errorf("%w: hdfs:/// needs fs.defaultFS (%s): set HADOOP_CONF_DIR to a directory whose core-site.xml names the cluster, or write hdfs://namenode:port/path", ErrHadoopConfig, where)
		}
		u, err := url.Parse(def)
		if err != nil || !strings.EqualFold(u.Scheme, "hdfs") || u.Host == "" {
			return nil, fmt.Errorf("%w: fs.defaultFS %q (%s) is not an hdfs://host URI", ErrHadoopConfig, def, where)
		}
		authority = u.Host
	}
	addrs, err := namenodeAddrs(conf, authority, where)
	if err != nil {
		return nil, err
	}
	options := hdfs.ClientOptionsFromConf(conf)
	cl := &hdfsCluster{authority: authority, addrs: addrs, options: options, protection: conf["hadoop.rpc.protection"],
		logical: conf["dfs.ha.namenodes."+authority] != "", nnConns: &connSet{conns: map[net.Conn]struct{}{}}, maxIdle: maxIdleOf(conf),
		ioTimeout: opts.HDFSIOTimeout, dialTimeout: opts.HDFSDialTimeout}
	if _, err := hadooprpc.ParseProtection(cl.protection); err != nil {
		return nil, fmt.Errorf("%w: %v (%s)", ErrHadoopConfig, err, where)
	}
	dialer := &net.Dialer{Timeout: opts.HDFSDialTimeout, KeepAlive: 30 * time.Second}
	if err := cl.authenticate(opts, options, where); err != nil {
		return nil, err
	}
	// colinmarc/hdfs speaks simple authentication to namenodes through
	// Spindle's SASL layer in its dial hook: Kerberos at every level of
	// hadoop.rpc.protection, and delegation tokens, which it lacks.
	options.KerberosClient = nil
	options.Addresses = addrs
	options.User = cl.user
	nnDial := cl.nnConns.dialFunc(dialer)
	if cl.auth != nil {
		sasl := hadooprpc.SASLDial(nnDial, cl.auth)
		nnDial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := sasl(ctx, network, addr)
			if errors.Is(err, hadooprpc.ErrProtection) {
				cl.refused.Store(&err)
			}
			return c, err
		}
	}
	options.NamenodeDialFunc = nnDial
	options.DatanodeDialFunc = dialer.DialContext
	if p := strings.TrimSpace(conf["dfs.data.transfer.protection"]); p != "" {
		// Datanode connections open with the SASL handshake, which
		// Spindle runs in colinmarc's datanode dial hook rather than
		// colinmarc's own: that one takes the datanode's first level
		// instead of the configured preference, speaks no triple DES, and
		// loses bytes when a read spans two wrapped messages.
		dial, err := hadooprpc.DataTransferDial(dialer.DialContext, hadooprpc.DataTransferConfig{
			Protection: p, CipherSuites: conf["dfs.encrypt.data.transfer.cipher.suites"]})
		if err != nil {
			return nil, fmt.Errorf("%w: %v (%s)", ErrHadoopConfig, err, where)
		}
		options.DatanodeDialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &refusalConn{Conn: c, cl: cl}, nil
		}
		if !strings.EqualFold(conf["dfs.encrypt.data.transfer"], "true") {
			options.DataTransferProtection = ""
		}
	}
	options.DatanodeDialFunc = cl.dnFails.wrap(options.DatanodeDialFunc)
	cl.options = options
	return cl, nil
}

// authenticate decides how cl's connections log in, and as whom: with a
// delegation token for the cluster (inside a YARN container), with a
// Kerberos login on a Kerberized cluster, or as a simple user.
func (cl *hdfsCluster) authenticate(opts Options, options hdfs.ClientOptions, where string) error {
	tok, file, found, err := delegationTokenFor(cl, opts)
	if err != nil {
		return err
	}
	switch {
	case found:
		// A delegation token for this cluster (inside a YARN container,
		// which has no Kerberos ticket): TOKEN authentication.
		id, err := hadooprpc.ParseDelegationTokenIdentifier(tok.Identifier)
		if err != nil {
			return fmt.Errorf("%w: %s for hdfs://%s: %v", ErrHadoopConfig, tok, cl.authority, err)
		}
		cl.user = id.Owner
		// Each connection takes the token the file holds as it opens:
		// an executor given fresh tokens swaps them in the file.
		cl.tokens = &tokenFile{path: file, service: cl.tokenService(), tok: tok}
		cl.tokens.current()
		cl.auth = hadooprpc.TokenSource{Current: cl.tokens.current, Protection: cl.protection}
	case options.KerberosClient != nil:
		// A Kerberized cluster: the user is the login's principal.
		kc, err := kerberos.Login(kerberos.Options{Conf: opts.Krb5Conf, CCache: opts.KerberosCCache,
			Principal: opts.KerberosPrincipal, Keytab: opts.KerberosKeytab})
		if err != nil {
			return fmt.Errorf("%w: hadoop.security.authentication is kerberos (%s): %v", ErrHadoopConfig, where, err)
		}
		if options.KerberosServicePrincipleName == "" {
			kc.Destroy()
			return fmt.Errorf("%w: hadoop.security.authentication is kerberos but dfs.namenode.kerberos.principal is not set (%s)", ErrHadoopConfig, where)
		}
		cl.krb = kc
		cl.user = kc.Credentials.UserName() + "@" + kc.Credentials.Realm()
		cl.auth = hadooprpc.KerberosAuth{Client: kc, Principal: options.KerberosServicePrincipleName, Protection: cl.protection}
	default:
		if cl.user, err = hdfsUser(opts); err != nil {
			return err
		}
	}
	return nil
}

// refusalConn notes a datanode's refusal of the client's
// dfs.data.transfer.protection, which colinmarc/hdfs may report only as a
// failed write.
type refusalConn struct {
	net.Conn
	cl *hdfsCluster
}

func (c *refusalConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if errors.Is(err, hadooprpc.ErrProtection) {
		c.cl.dnRefused.Store(&err)
	}
	return n, err
}

// namenodeAddrs returns the namenode addresses of authority: the namenodes
// of an HA nameservice (dfs.ha.namenodes.<ns> and
// dfs.namenode.rpc-address.<ns>.<nn>), the address of a plain nameservice,
// or authority itself (port 8020 when it has none).
func namenodeAddrs(conf hadoopconf.HadoopConf, authority, where string) ([]string, error) {
	if ids := conf["dfs.ha.namenodes."+authority]; ids != "" {
		var addrs []string
		for _, id := range strings.Split(ids, ",") {
			id = strings.TrimSpace(id)
			if id == "" {
				continue
			}
			key := "dfs.namenode.rpc-address." + authority + "." + id
			a := strings.TrimSpace(conf[key])
			if a == "" {
				return nil, fmt.Errorf("%w: nameservice %s lists namenode %s but %s is not set (%s)", ErrHadoopConfig, authority, id, key, where)
			}
			addrs = append(addrs, a)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("%w: dfs.ha.namenodes.%s lists no namenodes (%s)", ErrHadoopConfig, authority, where)
		}
		return addrs, nil
	}
	if a := strings.TrimSpace(conf["dfs.namenode.rpc-address."+authority]); a != "" {
		return []string{a}, nil
	}
	host, port, err := net.SplitHostPort(authority)
	if err != nil {
		host, port = authority, hdfsDefaultPort
	}
	if host == "" {
		return nil, fmt.Errorf("%w: hdfs://%s names no namenode host", ErrHadoopConfig, authority)
	}
	// A name the configuration does not know is a host, as in Hadoop.
	return []string{net.JoinHostPort(host, port)}, nil
}

// hdfsUser picks the HDFS user: Options.User, $HADOOP_USER_NAME, the login.
func hdfsUser(opts Options) (string, error) {
	if opts.User != "" {
		return opts.User, nil
	}
	if u := os.Getenv("HADOOP_USER_NAME"); u != "" {
		return u, nil
	}
	u, err := user.Current()
	if err != nil || u.Username == "" {
		return "", fmt.Errorf("fsys: no HDFS user: set HADOOP_USER_NAME (login user unknown: %v)", err)
	}
	return u.Username, nil
}

// dialHDFS connects to the cluster, retrying a bounded number of times,
// and checks that a namenode answers.
func dialHDFS(ctx context.Context, cl *hdfsCluster) (*hdfsFS, error) {
	h := &hdfsFS{cluster: cl, all: map[*pooledClient]struct{}{}}
	c, err := h.acquire(ctx)
	if err != nil {
		return nil, err
	}
	h.release(c)
	return h, nil
}

// dialClient opens a client to the cluster, retrying a bounded number of
// times, and checks that a namenode answers. A token the namenode refuses
// (expired, cancelled) is not retried.
func dialClient(ctx context.Context, cl *hdfsCluster) (*hdfs.Client, error) {
	backoff := hdfsRetryBackoff
	var last error
	for attempt := 1; ; attempt++ {
		stop := cl.nnConns.watch(ctx)
		c, err := hdfs.NewClient(cl.options)
		if err == nil {
			// Connecting only sends the handshake; a call proves a namenode
			// answers (and caches the defaults reads need).
			if _, err = c.ServerDefaults(); err == nil {
				stop()
				return c, nil
			}
			c.Close()
		}
		stop()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("hdfs://%s: connect to namenode %s: %w", cl.authority, strings.Join(cl.addrs, ", "), ctx.Err())
		}
		if refused := cl.refused.Load(); refused != nil {
			return nil, fmt.Errorf("hdfs://%s: %w: %w", cl.authority, ErrHadoopConfig, *refused)
		}
		if cl.tokens != nil && tokenRefused(err) {
			return nil, fmt.Errorf("hdfs://%s: the namenode refused the delegation token of %s: %w", cl.authority, cl.tokens.path, err)
		}
		if attempt == 1 {
			if unknown := unresolvable(ctx, cl.addrs); unknown != nil {
				return nil, fmt.Errorf("hdfs://%s: %w: %w (check fs.defaultFS and the namenode addresses of the Hadoop configuration)", cl.authority, ErrHadoopConfig, unknown)
			}
		}
		last = err
		if attempt == hdfsConnectAttempts {
			break
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("hdfs://%s: connect to namenode %s: %w", cl.authority, strings.Join(cl.addrs, ", "), ctx.Err())
		case <-t.C:
		}
		backoff *= 2
	}
	return nil, fmt.Errorf("hdfs://%s: %w: no answer from %s after %d attempts: %v",
		cl.authority, ErrNamenodeUnreachable, strings.Join(cl.addrs, ", "), hdfsConnectAttempts, last)
}

// hdfsFS is an FS over one HDFS cluster, through github.com/colinmarc/hdfs.
type hdfsFS struct {
	cluster *hdfsCluster

	clMu   sync.Mutex
	cur    *pooledClient              // the client new calls and files use
	all    map[*pooledClient]struct{} // every open client, current or retired
	closed bool

	nnMu sync.Mutex
	nn   *hadooprpc.FailoverClient // for the block locations the client does not expose
}

var _ FS = (*hdfsFS)(nil)

// uri returns the full URI of name, for errors.
func (h *hdfsFS) uri(name string) string { return "hdfs://" + h.cluster.authority + name }

// pathError turns a client error into an *fs.PathError on the URI of name
// whose message names the HDFS user, keeping errors.Is(err, fs.ErrNotExist)
// and friends working.
func (h *hdfsFS) pathError(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	err = interpretHDFS(err)
	if refused := h.cluster.dnRefused.Load(); refused != nil && !errors.Is(err, hadooprpc.ErrProtection) {
		err = fmt.Errorf("%w (%w)", err, *refused)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission), errors.Is(err, fs.ErrExist):
		err = fmt.Errorf("%w (as HDFS user %s)", err, h.cluster.user)
	}
	return &fs.PathError{Op: op, Path: h.uri(name), Err: err}
}

// HDFS exception classes and the os errors they stand for.
var hdfsExceptions = map[string]error{
	"java.io.FileNotFoundException":                                fs.ErrNotExist,
	"org.apache.hadoop.security.AccessControlException":            fs.ErrPermission,
	"org.apache.hadoop.fs.FileAlreadyExistsException":              fs.ErrExist,
	"org.apache.hadoop.hdfs.protocol.AlreadyBeingCreatedException": fs.ErrExist,
	"org.apache.hadoop.fs.PathIsNotEmptyDirectoryException":        syscall.ENOTEMPTY,
	"org.apache.hadoop.fs.ParentNotDirectoryException":             syscall.ENOTDIR,
}

// interpretHDFS maps a raw namenode error (the client returns some
// unwrapped, from reads for instance) to the os error it stands for.
func interpretHDFS(err error) error {
	var he hdfs.Error
	if errors.As(err, &he) {
		if mapped, ok := hdfsExceptions[he.Exception()]; ok {
			return fmt.Errorf("%w (%s)", mapped, he.Method())
		}
	}
	return err
}

func (h *hdfsFS) Open(ctx context.Context, name string) (File, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := h.acquire(ctx)
	if err != nil {
		return nil, h.pathError("open", name, err)
	}
	stop := h.cluster.nnConns.watch(ctx)
	r, err := c.c.Open(name)
	stop()
	if err != nil {
		h.release(c)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, h.pathError("open", name, err)
	}
	if r.Stat().IsDir() {
		r.Close()
		h.release(c)
		return nil, &fs.PathError{Op: "open", Path: h.uri(name), Err: syscall.EISDIR}
	}
	return newHDFSFile(h, c, name, r), nil
}

func (h *hdfsFS) Stat(ctx context.Context, name string) (fs.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := h.acquire(ctx)
	if err != nil {
		return nil, h.pathError("stat", name, err)
	}
	defer h.release(c)
	stop := h.cluster.nnConns.watch(ctx)
	fi, err := c.c.Stat(name)
	stop()
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return fi, h.pathError("stat", name, err)
}

func (h *hdfsFS) ReadDir(ctx context.Context, name string) ([]fs.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := h.acquire(ctx)
	if err != nil {
		return nil, h.pathError("readdir", name, err)
	}
	defer h.release(c)
	stop := h.cluster.nnConns.watch(ctx)
	infos, err := c.c.ReadDir(name)
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, h.pathError("readdir", name, err)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name() < infos[j].Name() })
	return infos, nil
}

func (h *hdfsFS) Glob(ctx context.Context, pattern string) ([]string, error) {
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, &fs.PathError{Op: "glob", Path: h.uri(pattern), Err: err}
	}
	if !path.IsAbs(pattern) {
		return nil, &fs.PathError{Op: "glob", Path: h.uri(pattern), Err: errors.New("pattern is not an absolute path")}
	}
	clean := path.Clean(pattern)
	if !hasMeta(clean) {
		if _, err := h.Stat(ctx, clean); err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil, nil
			}
			return nil, err
		}
		return []string{clean}, nil
	}
	var out []string
	if err := h.glob(ctx, "/", strings.Split(strings.TrimPrefix(clean, "/"), "/"), &out); err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}

// glob appends to out the names under dir matching the pattern elements,
// listing only the directories whose element has meta characters.
func (h *hdfsFS) glob(ctx context.Context, dir string, elems []string, out *[]string) error {
	elem, rest := elems[0], elems[1:]
	var matches []fs.FileInfo
	if !hasMeta(elem) {
		fi, err := h.Stat(ctx, path.Join(dir, elem))
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		if err != nil {
			return err
		}
		matches = []fs.FileInfo{fi}
	} else {
		infos, err := h.ReadDir(ctx, dir)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, fi := range infos {
			if ok, _ := path.Match(elem, fi.Name()); ok {
				matches = append(matches, fi)
			}
		}
	}
	for _, fi := range matches {
		p := path.Join(dir, fi.Name())
		if !hasMeta(elem) {
			p = path.Join(dir, elem)
		}
		switch {
		case len(rest) == 0:
			*out = append(*out, p)
		case fi.IsDir():
			if err := h.glob(ctx, p, rest, out); err != nil {
				return err
			}
		}
	}
	return nil
}

func (h *hdfsFS) MkdirAll(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c, err := h.acquire(ctx)
	if err != nil {
		return h.pathError("mkdir", name, err)
	}
	defer h.release(c)
	return h.pathError("mkdir", name, c.c.MkdirAll(name, 0o755))
}

// Rename renames from to to, replacing a file (or empty directory) at to.
func (h *hdfsFS) Rename(ctx context.Context, from, to string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c, err := h.acquire(ctx)
	if err != nil {
		return h.pathError("rename", from, err)
	}
	defer h.release(c)
	if err := c.c.Rename(from, to); err != nil {
		var pe *os.PathError
		name := from
		if errors.As(err, &pe) && pe.Path == to {
			name = to
		}
		return h.pathError("rename", name, err)
	}
	return nil
}

func (h *hdfsFS) Remove(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c, err := h.acquire(ctx)
	if err != nil {
		return h.pathError("remove", name, err)
	}
	defer h.release(c)
	return h.pathError("remove", name, c.c.Remove(name))
}

// Locations returns the hosts holding the bytes [off, off+length) of name,
// the one holding the most first.
func (h *hdfsFS) Locations(ctx context.Context, name string, off, length int64) ([]string, error) {
	if off < 0 || length < 0 {
		return nil, &fs.PathError{Op: "locations", Path: h.uri(name), Err: fmt.Errorf("negative range %d+%d", off, length)}
	}
	blocks, err := h.blockLocations(ctx, name, off, length)
	if err != nil {
		return nil, err
	}
	bytes := map[string]int64{}
	for _, b := range blocks {
		lo, hi := max(off, b.offset), min(off+length, b.offset+b.length)
		if hi <= lo {
			continue
		}
		for _, host := range b.hosts {
			bytes[host] += hi - lo
		}
	}
	hosts := make([]string, 0, len(bytes))
	for host := range bytes {
		hosts = append(hosts, host)
	}
	sort.Slice(hosts, func(i, j int) bool {
		if bytes[hosts[i]] != bytes[hosts[j]] {
			return bytes[hosts[i]] > bytes[hosts[j]]
		}
		return hosts[i] < hosts[j]
	})
	return hosts, nil
}

// Close disconnects from the cluster.
func (h *hdfsFS) Close() error {
	err := h.closeClients()
	if kc := h.cluster.krb; kc != nil {
		defer kc.Destroy()
	}
	h.nnMu.Lock()
	defer h.nnMu.Unlock()
	if h.nn != nil {
		h.nn.Close()
		h.nn = nil
	}
	return err
}

// sasl is how Spindle's own RPC client authenticates to the cluster's
// namenodes: a delegation token, Kerberos, or nothing (simple).
func (cl *hdfsCluster) sasl() hadooprpc.ClientSASL { return cl.auth }
