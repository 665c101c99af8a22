package hdfstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// The namespace is saved as a JSON image under Dir/namenode whenever it
// changes (at most a few times a second) and when the cluster closes. Block
// locations are not saved: datanodes report their replicas at start, as in
// HDFS.

const imageVersion = 1

type image struct {
	Version     int         `json:"version"`
	PoolID      string      `json:"poolId"`
	NextInode   uint64      `json:"nextInode"`
	NextBlockID uint64      `json:"nextBlockId"`
	NextGS      uint64      `json:"nextGenerationStamp"`
	Root        *imageInode `json:"root"`
}

type imageInode struct {
	ID          uint64        `json:"id"`
	Name        string        `json:"name"`
	Dir         bool          `json:"dir,omitempty"`
	Perm        uint16        `json:"perm"`
	Owner       string        `json:"owner"`
	Group       string        `json:"group"`
	Mtime       int64         `json:"mtime"`
	Atime       int64         `json:"atime"`
	Children    []*imageInode `json:"children,omitempty"`
	Replication int           `json:"replication,omitempty"`
	BlockSize   int64         `json:"blockSize,omitempty"`
	Blocks      []imageBlock  `json:"blocks,omitempty"`
	Open        bool          `json:"underConstruction,omitempty"`
}

type imageBlock struct {
	ID       uint64 `json:"id"`
	GS       uint64 `json:"gs"`
	NumBytes int64  `json:"numBytes"`
}

// seed creates the directories a fresh cluster starts with: /tmp (world
// writable, sticky) and the superuser's home.
func (nn *namenode) seed() {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	su := nn.cfg.Superuser
	tmp := nn.newInode(nn.root, "tmp", true, 01777, su)
	link(nn.root, tmp)
	usr := nn.newInode(nn.root, "user", true, 0755, su)
	link(nn.root, usr)
	home := nn.newInode(usr, su, true, 0755, su)
	link(usr, home)
	nn.dirty = true
}

func readImage(p string) (*image, error) {
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hdfstest: read namespace image: %w", err)
	}
	var img image
	if err := json.Unmarshal(b, &img); err != nil {
		return nil, fmt.Errorf("hdfstest: parse namespace image %s: %w", p, err)
	}
	if img.Version != imageVersion || img.Root == nil || img.PoolID == "" {
		return nil, fmt.Errorf("hdfstest: namespace image %s: unsupported version %d or missing root", p, img.Version)
	}
	return &img, nil
}

func (nn *namenode) loadImage(img *image) error {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	nn.nextInode, nn.nextBlockID, nn.nextGS = img.NextInode, img.NextBlockID, img.NextGS
	var build func(ii *imageInode, parent *inode) (*inode, error)
	build = func(ii *imageInode, parent *inode) (*inode, error) {
		n := &inode{
			id: ii.ID, name: ii.Name, parent: parent, isDir: ii.Dir, perm: ii.Perm,
			owner: ii.Owner, group: ii.Group, mtime: ii.Mtime, atime: ii.Atime,
			replication: ii.Replication, blockSize: ii.BlockSize,
		}
		if ii.Open {
			n.lease = "recovering"
		}
		if n.isDir {
			n.children = map[string]*inode{}
			for _, ci := range ii.Children {
				c, err := build(ci, n)
				if err != nil {
					return nil, err
				}
				n.children[c.name] = c
			}
		}
		for _, ib := range ii.Blocks {
			if nn.blocks[ib.ID] != nil {
				return nil, fmt.Errorf("block %d belongs to two files", ib.ID)
			}
			b := &block{id: ib.ID, gs: ib.GS, numBytes: ib.NumBytes, file: n, replicas: map[int]*replica{}}
			n.blocks = append(n.blocks, b)
			nn.blocks[b.id] = b
		}
		return n, nil
	}
	root, err := build(img.Root, nil)
	if err != nil {
		return err
	}
	nn.root = root
	return nil
}

// recoverAfterRestart closes the files that were being written when the
// cluster stopped, now that the datanodes reported what they hold.
func (nn *namenode) recoverAfterRestart() {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	var walk func(n *inode)
	walk = func(n *inode) {
		if n.lease != "" {
			nn.recoverLeaseLocked(n)
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(nn.root)
}

func (nn *namenode) snapshotImage() *image {
	var conv func(n *inode) *imageInode
	conv = func(n *inode) *imageInode {
		ii := &imageInode{
			ID: n.id, Name: n.name, Dir: n.isDir, Perm: n.perm, Owner: n.owner, Group: n.group,
			Mtime: n.mtime, Atime: n.atime, Replication: n.replication, BlockSize: n.blockSize,
			Open: n.lease != "",
		}
		for _, c := range n.sortedChildren() {
			ii.Children = append(ii.Children, conv(c))
		}
		for _, b := range n.blocks {
			ii.Blocks = append(ii.Blocks, imageBlock{ID: b.id, GS: b.gs, NumBytes: b.numBytes})
		}
		return ii
	}
	return &image{
		Version: imageVersion, PoolID: nn.poolID, NextInode: nn.nextInode,
		NextBlockID: nn.nextBlockID, NextGS: nn.nextGS, Root: conv(nn.root),
	}
}

// saveImage writes the namespace atomically (temporary file, then rename).
func (nn *namenode) saveImage(p string) error {
	nn.mu.Lock()
	img := nn.snapshotImage()
	nn.dirty = false
	nn.mu.Unlock()
	b, err := json.Marshal(img)
	if err != nil {
		return fmt.Errorf("hdfstest: encode namespace image: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("hdfstest: save namespace image: %w", err)
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("hdfstest: save namespace image: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("hdfstest: save namespace image: %w", err)
	}
	return nil
}

// saveLoop saves the namespace when it changed, until ctx ends.
func (nn *namenode) saveLoop(ctx context.Context, p string) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			nn.mu.RLock()
			dirty := nn.dirty
			nn.mu.RUnlock()
			if dirty {
				if err := nn.saveImage(p); err != nil {
					nn.log.Error("save namespace image", "err", err)
				}
			}
		}
	}
}
