package hdfstest

import (
	"errors"
	"fmt"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
)

// The Java exception classes the namenode raises; HDFS clients map them to
// their own errors (colinmarc/hdfs: os.ErrNotExist, os.ErrPermission, ...).
const (
	classFileNotFound        = "java.io.FileNotFoundException"
	classAccessControl       = hadooprpc.ClassAccessControl
	classFileAlreadyExists   = "org.apache.hadoop.fs.FileAlreadyExistsException"
	classAlreadyBeingCreated = "org.apache.hadoop.hdfs.protocol.AlreadyBeingCreatedException"
	classPathIsNotEmptyDir   = "org.apache.hadoop.fs.PathIsNotEmptyDirectoryException"
	classParentNotDirectory  = "org.apache.hadoop.fs.ParentNotDirectoryException"
	classInvalidPath         = "org.apache.hadoop.fs.InvalidPathException"
	classLeaseExpired        = "org.apache.hadoop.hdfs.server.namenode.LeaseExpiredException"
	classNotReplicatedYet    = "org.apache.hadoop.hdfs.server.namenode.NotReplicatedYetException"
	classIllegalArgument     = "org.apache.hadoop.HadoopIllegalArgumentException"
	classIOException         = hadooprpc.ClassIOException
	classStandby             = hadooprpc.ClassStandby
)

func remoteErr(class, format string, args ...any) error {
	return &hadooprpc.RemoteError{Class: class, Message: fmt.Sprintf(format, args...)}
}

func errNotFound(path string) error {
	return remoteErr(classFileNotFound, "File does not exist: %s", path)
}

// errDenied words a permission failure the way HDFS does, naming the user,
// the access and the inode.
func errDenied(u *user, a access, n *inode) error {
	return remoteErr(classAccessControl, "Permission denied: user=%s, access=%s, inode=%q:%s:%s:%s",
		u.name, a, n.path(), n.owner, n.group, n.modeString())
}

func classOf(err error) string { return hadooprpc.ExceptionClass(err) }

// errStopped reports work refused because the datanode is stopping.
var errStopped = errors.New("hdfstest: datanode stopped")
