package fsys

import (
	"context"
	"fmt"
)

// openHDFS connects to the HDFS cluster named by authority (empty for
// fs.defaultFS).
func openHDFS(ctx context.Context, authority string, opts Options) (FS, error) {
	return nil, fmt.Errorf("hdfs://%s: HDFS support is not built yet", authority)
}
