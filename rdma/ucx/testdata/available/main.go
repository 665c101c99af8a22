// Command available prints what ucx.Available says in this build, for the
// package's test of builds without cgo.
package main

import (
	"fmt"

	"github.com/spindle-ml/spindle/rdma/ucx"
)

func main() {
	ok, detail := ucx.Available()
	fmt.Println(ok, detail)
}
