package fsys

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Options configure how URIs are resolved to file systems.
type Options struct {
	// HadoopConfDir is the directory holding core-site.xml and
	// hdfs-site.xml; empty means $HADOOP_CONF_DIR.
	HadoopConfDir string
	// User is the HDFS user; empty means $HADOOP_USER_NAME, then the login name.
	// On a Kerberized cluster the user is the login's principal instead.
	User string
	// KerberosPrincipal and KerberosKeytab log in to a Kerberized cluster
	// (hadoop.security.authentication kerberos) with a keytab; empty, the
	// ticket cache kinit filled is used.
	KerberosPrincipal, KerberosKeytab string
	// Krb5Conf is the krb5.conf of the Kerberos login (empty: the first
	// file of $KRB5_CONFIG, then /etc/krb5.conf) and KerberosCCache its
	// ticket cache when no keytab is given (empty: $KRB5CCNAME, then
	// kinit's default): a program that talks to clusters of several
	// realms sets them per resolver rather than in its environment.
	Krb5Conf, KerberosCCache string
	// TokenFile is a Hadoop credentials file whose HDFS delegation tokens
	// authenticate to the clusters they are for, before any Kerberos
	// login; empty means $HADOOP_TOKEN_FILE_LOCATION, which YARN sets in
	// containers.
	TokenFile string
	// NoTokens ignores TokenFile and $HADOOP_TOKEN_FILE_LOCATION: the
	// resolver authenticates with its own login only.
	NoTokens bool
	// HDFSDialTimeout bounds each TCP connect to a namenode or datanode;
	// zero means DefaultHDFSDialTimeout.
	HDFSDialTimeout time.Duration
	// HDFSIOTimeout bounds each read or write call on a datanode stream,
	// so that a stalled datanode fails the call rather than hanging it;
	// zero means DefaultHDFSIOTimeout.
	HDFSIOTimeout time.Duration
}

// The HDFS timeouts of Options left zero.
const (
	DefaultHDFSDialTimeout = 10 * time.Second
	DefaultHDFSIOTimeout   = 2 * time.Minute
)

// withDefaults returns o with its zero timeouts set to their defaults.
func (o Options) withDefaults() Options {
	if o.HDFSDialTimeout <= 0 {
		o.HDFSDialTimeout = DefaultHDFSDialTimeout
	}
	if o.HDFSIOTimeout <= 0 {
		o.HDFSIOTimeout = DefaultHDFSIOTimeout
	}
	return o
}

// Resolver maps URIs to file systems, keeping one client per HDFS cluster.
// It is safe for concurrent use.
type Resolver struct {
	opts  Options
	local FS

	mu   sync.Mutex
	hdfs map[string]FS // by authority ("" for fs.defaultFS)
}

// NewResolver returns a Resolver.
func NewResolver(opts Options) *Resolver {
	return &Resolver{opts: opts.withDefaults(), local: Local(), hdfs: map[string]FS{}}
}

// Resolve returns the file system holding uri and the name of uri inside
// it. A plain path is a local path, made absolute.
func (r *Resolver) Resolve(ctx context.Context, uri string) (FS, string, error) {
	scheme, authority, name, err := SplitURI(uri)
	if err != nil {
		return nil, "", err
	}
	switch scheme {
	case "file":
		return r.local, name, nil
	case "hdfs":
		r.mu.Lock()
		defer r.mu.Unlock()
		if fs, ok := r.hdfs[authority]; ok {
			return fs, name, nil
		}
		fs, err := openHDFS(ctx, authority, r.opts)
		if err != nil {
			return nil, "", err
		}
		r.hdfs[authority] = fs
		return fs, name, nil
	}
	return nil, "", fmt.Errorf("%s: unsupported scheme %q (want file:// or hdfs://)", uri, scheme)
}

// Close releases the HDFS clients.
func (r *Resolver) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first error
	for k, fs := range r.hdfs {
		if c, ok := fs.(interface{ Close() error }); ok {
			if err := c.Close(); err != nil && first == nil {
				first = err
			}
		}
		delete(r.hdfs, k)
	}
	return first
}

// SplitURI splits uri into scheme, authority and an absolute slash path.
// Plain paths are local ("file") and made absolute.
func SplitURI(uri string) (scheme, authority, name string, err error) {
	if !strings.Contains(uri, "://") {
		abs, err := filepath.Abs(uri)
		if err != nil {
			return "", "", "", fmt.Errorf("%s: %w", uri, err)
		}
		return "file", "", filepath.ToSlash(abs), nil
	}
	u, err := url.Parse(uri)
	if err != nil {
		return "", "", "", fmt.Errorf("parse URI %q: %w", uri, err)
	}
	scheme = strings.ToLower(u.Scheme)
	name = u.Path
	if name == "" {
		name = "/"
	}
	if scheme == "file" && u.Host != "" && u.Host != "localhost" {
		return "", "", "", fmt.Errorf("%s: file URIs name no host (write file:///path)", uri)
	}
	return scheme, u.Host, name, nil
}

// JoinURI returns the URI of name inside the file system that base names.
func JoinURI(base, name string) string {
	scheme, authority, _, err := SplitURI(base)
	if err != nil || scheme == "file" {
		return "file://" + name
	}
	return scheme + "://" + authority + name
}
