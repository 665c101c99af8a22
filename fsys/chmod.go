package fsys

import (
	"context"
	"io/fs"
	"os"
)

// Chmoder is a file system whose files carry permission bits that can be
// set: both local files and HDFS. Staging keeps a shipped program's
// execute bit with its copy this way, so that every executor that
// fetches the copy can restore it.
type Chmoder interface {
	// Chmod sets the permission bits of name.
	Chmod(ctx context.Context, name string, mode fs.FileMode) error
}

var (
	_ Chmoder = localFS{}
	_ Chmoder = (*hdfsFS)(nil)
)

// Chmod sets the permission bits of a local file.
func (localFS) Chmod(ctx context.Context, name string, mode fs.FileMode) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return os.Chmod(name, mode.Perm())
}

// Chmod sets the permission bits of an HDFS file (its setPermission).
func (h *hdfsFS) Chmod(ctx context.Context, name string, mode fs.FileMode) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c, err := h.acquire(ctx)
	if err != nil {
		return h.pathError("chmod", name, err)
	}
	defer h.release(c)
	stop := h.cluster.nnConns.watch(ctx)
	err = c.c.Chmod(name, mode.Perm())
	stop()
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return h.pathError("chmod", name, err)
}
