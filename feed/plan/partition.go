package plan

import (
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/spindle-ml/spindle/feed"
)

// addPartitionColumns gives every file the requested partition keys as
// columns, appended to its own: int64 when every file's value of the key
// is an integer, else utf8. A file whose path lacks a key, or that holds a
// column of the same name, is an input error naming it.
func addPartitionColumns(infos []*fileInfo, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	isInt := map[string]bool{}
	for _, k := range keys {
		isInt[k] = true
	}
	for _, fi := range infos {
		vals := feed.PartitionValues(fi.name)
		fi.partition = map[string]string{}
		for _, k := range keys {
			v, ok := vals[k]
			if !ok {
				return fmt.Errorf("%w: %s has no %s=VALUE directory on its path, which spindle.input.partitionColumns asks for",
					feed.ErrInput, fi.uri, k)
			}
			fi.partition[k] = v
			if _, err := strconv.ParseInt(v, 10, 64); err != nil && v != feed.HiveDefaultPartition {
				isInt[k] = false
			}
		}
	}
	for _, fi := range infos {
		if fi.schema == nil {
			continue
		}
		fields := fi.schema.Fields()
		for _, k := range keys {
			if fi.schema.HasField(k) {
				return fmt.Errorf("%w: %s has a column %q and a %s=VALUE directory: the partition column would hide it",
					feed.ErrInput, fi.uri, k, k)
			}
			t := arrow.DataType(arrow.BinaryTypes.String)
			if isInt[k] {
				t = arrow.PrimitiveTypes.Int64
			}
			fields = append(fields, arrow.Field{Name: k, Type: t, Nullable: true})
		}
		fi.schema = arrow.NewSchema(fields, nil)
	}
	return nil
}
