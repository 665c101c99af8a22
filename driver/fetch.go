package driver

import (
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// ShippedScheme names, in a task, a file the executor fetches from the
// driver (FetchFile) rather than reading it where it runs.
const ShippedScheme = "spindle-driver:///"

// SharesFileSystem says that local executors read the submit host's files.
func (l *Local) SharesFileSystem() bool { return true }

func sharesFileSystem(cm ClusterManager) bool {
	s, ok := cm.(FileSharer)
	return ok && s.SharesFileSystem()
}

// shipFromDriver rewrites the local files a job ships (--files,
// --py-files, --archives: absolute paths by now) into ShippedScheme URIs
// and returns the files the driver serves, by name. URIs of shared file
// systems (hdfs://) are left for the executors to read.
func shipFromDriver(files, pyFiles, archives []string) (f, py, ar []string, served map[string]string) {
	served = map[string]string{}
	ship := func(p string) string {
		local, ok := localPath(p)
		if !ok {
			return p
		}
		name := path.Base(filepath.ToSlash(local))
		served[name] = local
		return ShippedScheme + name
	}
	for _, p := range files {
		f = append(f, ship(p))
	}
	for _, p := range pyFiles {
		py = append(py, ship(p))
	}
	for _, a := range archives {
		uri, alias := SplitArchive(a)
		ar = append(ar, ship(uri)+"#"+alias)
	}
	return f, py, ar, served
}

// hadoopConfPrefix names the driver's Hadoop configuration files among the
// files it serves.
const hadoopConfPrefix = "hadoop-conf--"

// shipHadoopConf adds the Hadoop client configuration the driver uses (the
// XML files of dir) to the served files, for executors on hosts whose own
// configuration may be missing or differ, and returns their names.
func shipHadoopConf(dir string, served map[string]string) []string {
	if dir == "" {
		return nil
	}
	xmls, _ := filepath.Glob(filepath.Join(dir, "*.xml"))
	var names []string
	for _, x := range xmls {
		name := filepath.Base(x)
		served[hadoopConfPrefix+name] = x
		names = append(names, name)
	}
	return names
}

// fetchChunk is the size of one FileChunk.
const fetchChunk = 1 << 20

// FetchFile streams one of the job's shipped files.
func (s *controlServer) FetchFile(req *driverpb.FetchFileRequest, stream driverpb.Control_FetchFileServer) error {
	local, ok := s.served[req.GetName()]
	if !ok || strings.ContainsAny(req.GetName(), "/\\") {
		return status.Errorf(codes.NotFound, "the job ships no file %q", req.GetName())
	}
	f, err := os.Open(local)
	if err != nil {
		return status.Errorf(codes.Unavailable, "open shipped file %s on the submit host: %v", req.GetName(), err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return status.Errorf(codes.Unavailable, "stat shipped file %s: %v", req.GetName(), err)
	}
	first := &driverpb.FileChunk{Mode: uint32(fi.Mode().Perm()), Size: fi.Size()}
	buf := make([]byte, fetchChunk)
	for {
		n, err := f.Read(buf)
		if n > 0 || first != nil {
			c := first
			if c == nil {
				c = &driverpb.FileChunk{}
			}
			c.Data = buf[:n]
			if serr := stream.Send(c); serr != nil {
				return serr
			}
			first = nil
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return status.Errorf(codes.Unavailable, "read shipped file %s: %v", req.GetName(), err)
		}
	}
}
