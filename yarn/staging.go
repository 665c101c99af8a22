package yarn

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path"
	"strconv"

	"github.com/spindle-ml/spindle/fsys"
)

// stager copies what containers need to the application's staging
// directory on the cluster's default file system.
type stager struct {
	fs   fsys.FS
	base string // URI of the directory, hdfs://authority/user/<u>/.spindleStaging/<appId>
	dir  string // path inside fs
	host string
	port int32
}

// newStager resolves hdfs:///user/<user>/.spindleStaging/<appID>.
func newStager(ctx context.Context, r *fsys.Resolver, defaultFS, user, appID string) (*stager, error) {
	u, err := url.Parse(defaultFS)
	if err != nil || u.Scheme != "hdfs" || u.Host == "" {
		return nil, fmt.Errorf("fs.defaultFS %q is not an hdfs://host:port URI: YARN containers fetch the spindle binary from HDFS", defaultFS)
	}
	dir := path.Join("/user", user, ".spindleStaging", appID)
	base := "hdfs://" + u.Host + dir
	f, name, err := r.Resolve(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("staging directory %s: %w", base, err)
	}
	host, portS, err := net.SplitHostPort(u.Host)
	port := int64(8020)
	if err == nil {
		port, _ = strconv.ParseInt(portS, 10, 32)
	} else {
		host = u.Host
	}
	if err := f.MkdirAll(ctx, name); err != nil {
		return nil, fmt.Errorf("create staging directory %s: %w", base, err)
	}
	return &stager{fs: f, base: base, dir: name, host: host, port: int32(port)}, nil
}

// put copies a local file into the staging directory and describes it as
// a LocalResource with the size and modification time HDFS recorded.
func (s *stager) put(ctx context.Context, local, name string) (Resource, error) {
	in, err := os.Open(local)
	if err != nil {
		return Resource{}, fmt.Errorf("stage %s: %w", local, err)
	}
	defer in.Close()
	target := path.Join(s.dir, name)
	if parent := path.Dir(target); parent != s.dir {
		if err := s.fs.MkdirAll(ctx, parent); err != nil {
			return Resource{}, fmt.Errorf("stage %s to %s: %w", local, s.base, err)
		}
	}
	if err := fsys.WriteAtomic(ctx, s.fs, target, in); err != nil {
		return Resource{}, fmt.Errorf("stage %s to %s: %w", local, s.base, err)
	}
	// The copy keeps the file's mode, which executors restore: a shipped
	// program (-- bin/logreg) stays executable.
	if st, err := in.Stat(); err == nil {
		if c, ok := s.fs.(fsys.Chmoder); ok {
			if err := c.Chmod(ctx, target, st.Mode().Perm()); err != nil {
				return Resource{}, fmt.Errorf("keep the mode of %s on its staged copy %s: %w", local, target, err)
			}
		}
	}
	fi, err := s.fs.Stat(ctx, target)
	if err != nil {
		return Resource{}, fmt.Errorf("stat staged %s: %w", target, err)
	}
	return s.resource(target, fi, ""), nil
}

// resource describes the file name on the staging file system, as fi
// says it is, as a LocalResource of visibility vis (empty: APPLICATION).
func (s *stager) resource(name string, fi fs.FileInfo, vis string) Resource {
	return Resource{Scheme: "hdfs", Host: s.host, Port: s.port, File: name, Size: fi.Size(), Timestamp: fi.ModTime().UnixMilli(), Visibility: vis}
}

// uri returns the hdfs:// URI of name on the staging file system.
func (s *stager) uri(name string) string {
	return "hdfs://" + net.JoinHostPort(s.host, strconv.Itoa(int(s.port))) + name
}

// removeAll removes the staging directory and everything in it.
func (s *stager) removeAll(ctx context.Context) error {
	return removeTree(ctx, s.fs, s.dir)
}

func removeTree(ctx context.Context, f fsys.FS, name string) error {
	entries, err := f.ReadDir(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		child := path.Join(name, e.Name())
		if e.IsDir() {
			err = removeTree(ctx, f, child)
		} else {
			err = f.Remove(ctx, child)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := f.Remove(ctx, name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
