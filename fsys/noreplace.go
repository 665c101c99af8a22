package fsys

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
)

// NoReplaceRenamer is a file system that can rename a file only when its
// new name is free, in one step: the first of several writers publishing
// the same name wins and the others learn it, where Rename would let the
// last one replace a file that readers may already have described by its
// modification time (a YARN LocalResource).
type NoReplaceRenamer interface {
	// RenameNoReplace renames from to to; when to exists it fails with an
	// error satisfying errors.Is(err, fs.ErrExist) and changes nothing.
	RenameNoReplace(ctx context.Context, from, to string) error
}

var (
	_ NoReplaceRenamer = localFS{}
	_ NoReplaceRenamer = (*hdfsFS)(nil)
)

// RenameNoReplace renames a local file by linking it under its new name
// (link(2) refuses an existing name) and then removing the old one.
func (localFS) RenameNoReplace(ctx context.Context, from, to string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Link(filepath.FromSlash(from), filepath.FromSlash(to)); err != nil {
		return err
	}
	return os.Remove(filepath.FromSlash(from))
}

// RenameNoReplace renames with the namenode's rename2 without its
// overwrite option, which fails with FileAlreadyExistsException when to
// exists (colinmarc/hdfs always asks to overwrite).
func (h *hdfsFS) RenameNoReplace(ctx context.Context, from, to string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	nn, err := h.nnClient()
	if err != nil {
		return h.pathError("rename", from, err)
	}
	req := &hadooppb.Rename2RequestProto{Src: proto.String(from), Dst: proto.String(to), OverwriteDest: proto.Bool(false)}
	if err := nn.Call(ctx, "rename2", req, &hadooppb.Rename2ResponseProto{}); err != nil {
		var re *hadooprpc.RemoteError
		if errors.As(err, &re) {
			if mapped, ok := hdfsExceptions[re.Class]; ok {
				err = fmt.Errorf("%w (%s)", mapped, re.Message)
			}
		}
		name := from
		if errors.Is(err, fs.ErrExist) {
			name = to
		}
		return h.pathError("rename", name, err)
	}
	return nil
}
