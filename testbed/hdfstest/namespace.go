package hdfstest

import (
	"path"
	"sort"
	"strings"
	"time"
)

// inode is a file or directory of the namespace.
type inode struct {
	id     uint64
	name   string
	parent *inode
	isDir  bool
	perm   uint16 // permission bits, sticky bit included (01000)
	owner  string
	group  string
	mtime  int64 // milliseconds since the epoch
	atime  int64

	children map[string]*inode // directories

	// Files.
	replication int
	blockSize   int64
	blocks      []*block
	lease       string // the writing client's name while under construction
}

func (n *inode) path() string {
	if n.parent == nil {
		return "/"
	}
	var parts []string
	for x := n; x.parent != nil; x = x.parent {
		parts = append(parts, x.name)
	}
	var b strings.Builder
	for i := len(parts) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(parts[i])
	}
	return b.String()
}

func (n *inode) length() int64 {
	var l int64
	for _, b := range n.blocks {
		l += b.numBytes
	}
	return l
}

func (n *inode) underConstruction() bool { return n.lease != "" }

// sortedChildren returns a directory's children by name (byte order, as
// HDFS lists them).
func (n *inode) sortedChildren() []*inode {
	out := make([]*inode, 0, len(n.children))
	for _, c := range n.children {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func (n *inode) modeString() string {
	b := []byte("-rwxrwxrwx")
	if n.isDir {
		b[0] = 'd'
	}
	for i := 0; i < 9; i++ {
		if n.perm&(1<<(8-i)) == 0 {
			b[i+1] = '-'
		}
	}
	if n.perm&01000 != 0 {
		if b[9] == 'x' {
			b[9] = 't'
		} else {
			b[9] = 'T'
		}
	}
	return string(b)
}

// isAncestorOf reports whether n is x or one of its ancestors.
func (n *inode) isAncestorOf(x *inode) bool {
	for ; x != nil; x = x.parent {
		if x == n {
			return true
		}
	}
	return false
}

// access is a permission a caller needs on an inode.
type access uint16

const (
	accessExecute access = 1
	accessWrite   access = 2
	accessRead    access = 4
	accessAll            = accessRead | accessWrite | accessExecute
)

func (a access) String() string {
	switch a {
	case accessRead:
		return "READ"
	case accessWrite:
		return "WRITE"
	case accessExecute:
		return "EXECUTE"
	case accessRead | accessExecute:
		return "READ_EXECUTE"
	case accessWrite | accessExecute:
		return "WRITE_EXECUTE"
	case accessAll:
		return "ALL"
	}
	return "NONE"
}

// user is a caller as the namenode sees it.
type user struct {
	name   string
	groups []string
	super  bool
}

func (u *user) inGroup(g string) bool {
	for _, x := range u.groups {
		if x == g {
			return true
		}
	}
	return false
}

// allowed reports whether u may access n for a, by POSIX rules: the owner
// class if u owns n, else the group class if u is in n's group, else other.
func (u *user) allowed(n *inode, a access) bool {
	if u.super {
		return true
	}
	var bits uint16
	switch {
	case u.name == n.owner:
		bits = n.perm >> 6
	case u.inGroup(n.group):
		bits = n.perm >> 3
	default:
		bits = n.perm
	}
	return access(bits&7)&a == a
}

func (u *user) check(n *inode, a access) error {
	if !u.allowed(n, a) {
		return errDenied(u, a, n)
	}
	return nil
}

// checkSticky enforces the sticky bit of dir: only the owner of child, of
// dir, or the superuser may delete or rename child.
func (u *user) checkSticky(dir, child *inode) error {
	if dir.perm&01000 == 0 || u.super || u.name == child.owner || u.name == dir.owner {
		return nil
	}
	return remoteErr(classAccessControl, "Permission denied by sticky bit: user=%s, path=%q:%s:%s:%s, parent=%q:%s:%s:%s",
		u.name, child.path(), child.owner, child.group, child.modeString(), dir.path(), dir.owner, dir.group, dir.modeString())
}

// walk is a resolved path: the inodes of its prefixes, root first.
type walk struct {
	path  string
	names []string
	nodes []*inode // nodes[i] is the inode of names[:i]; nil past the last existing one
}

func (w *walk) target() *inode { return w.nodes[len(w.nodes)-1] }

func (w *walk) parent() *inode {
	if len(w.nodes) < 2 {
		return nil
	}
	return w.nodes[len(w.nodes)-2]
}

// lastExisting returns the deepest existing inode on the path.
func (w *walk) lastExisting() *inode {
	for i := len(w.nodes) - 1; i >= 0; i-- {
		if w.nodes[i] != nil {
			return w.nodes[i]
		}
	}
	return nil
}

// cleanPath validates an HDFS path: absolute, no "." or ".." components.
func cleanPath(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", remoteErr(classInvalidPath, "Invalid path name Path is not absolute: %s", p)
	}
	for _, c := range strings.Split(p, "/") {
		if c == "." || c == ".." || strings.Contains(c, ":") {
			return "", remoteErr(classInvalidPath, "Invalid path name Invalid file name: %s", p)
		}
	}
	return path.Clean(p), nil
}

// resolve walks p from the root, checking that u may traverse (EXECUTE)
// every existing ancestor directory of the target. A file in the middle
// of the path ends the walk.
func (nn *namenode) resolve(u *user, p string) (*walk, error) {
	clean, err := cleanPath(p)
	if err != nil {
		return nil, err
	}
	w := &walk{path: clean}
	if clean != "/" {
		w.names = strings.Split(clean[1:], "/")
	}
	w.nodes = make([]*inode, len(w.names)+1)
	w.nodes[0] = nn.root
	cur := nn.root
	for i, name := range w.names {
		if !cur.isDir {
			return nil, remoteErr(classParentNotDirectory, "%s (is not a directory)", cur.path())
		}
		if err := u.check(cur, accessExecute); err != nil {
			return nil, err
		}
		next := cur.children[name]
		if next == nil {
			break
		}
		w.nodes[i+1] = next
		cur = next
	}
	return w, nil
}

// newInode allocates an inode under parent (not yet linked).
func (nn *namenode) newInode(parent *inode, name string, dir bool, perm uint16, owner string) *inode {
	nn.nextInode++
	now := time.Now().UnixMilli()
	n := &inode{
		id: nn.nextInode, name: name, parent: parent, isDir: dir, perm: perm,
		owner: owner, mtime: now, atime: now,
	}
	// HDFS gives new inodes their parent's group (the BSD rule).
	if parent != nil {
		n.group = parent.group
	} else {
		n.group = nn.cfg.Supergroup
	}
	if dir {
		n.children = map[string]*inode{}
	}
	return n
}

func link(parent, child *inode) {
	child.parent = parent
	parent.children[child.name] = child
	parent.mtime = time.Now().UnixMilli()
}

func unlink(child *inode) {
	p := child.parent
	delete(p.children, child.name)
	p.mtime = time.Now().UnixMilli()
	child.parent = nil
}

// subtreeFiles returns every file at or under n.
func subtreeFiles(n *inode) []*inode {
	if !n.isDir {
		return []*inode{n}
	}
	var out []*inode
	for _, c := range n.children {
		out = append(out, subtreeFiles(c)...)
	}
	return out
}

// checkSubtree requires a on every directory under n (HDFS's check before a
// recursive delete).
func (u *user) checkSubtree(n *inode, a access) error {
	if !n.isDir {
		return nil
	}
	if err := u.check(n, a); err != nil {
		return err
	}
	for _, c := range n.sortedChildren() {
		if err := u.checkSubtree(c, a); err != nil {
			return err
		}
	}
	return nil
}
