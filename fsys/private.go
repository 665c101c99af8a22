package fsys

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
)

// umask is the process's file mode creation mask, read once at start-up
// (before any goroutine could create a file while it is briefly 0).
var umask = func() os.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return os.FileMode(m)
}()

// privateFS is implemented by file systems that can create files and
// directories only their owner can read: training output, checkpoints,
// event logs and tokens.
type privateFS interface {
	CreatePrivate(ctx context.Context, name string) (AtomicFile, error)
	MkdirPrivate(ctx context.Context, name string) error
}

// CreatePrivate is CreateAtomic for a file that holds output, a
// checkpoint or a token: on the local file system it is made 0600 (HDFS
// files keep the cluster's permissions, set by its umask and ACLs).
func CreatePrivate(ctx context.Context, f FS, name string) (AtomicFile, error) {
	if p, ok := f.(privateFS); ok {
		return p.CreatePrivate(ctx, name)
	}
	return f.CreateAtomic(ctx, name)
}

// MkdirPrivate is MkdirAll for directories of such files: on the local
// file system the directories it makes are 0700.
func MkdirPrivate(ctx context.Context, f FS, name string) error {
	if p, ok := f.(privateFS); ok {
		return p.MkdirPrivate(ctx, name)
	}
	return f.MkdirAll(ctx, name)
}

var _ privateFS = localFS{}

func (l localFS) CreatePrivate(ctx context.Context, name string) (AtomicFile, error) {
	return l.create(ctx, name, 0o600)
}

func (localFS) MkdirPrivate(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return os.MkdirAll(filepath.FromSlash(name), 0o700)
}
