package driver

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
)

// MasterKind says which cluster manager a master URL names.
type MasterKind string

// Master kinds.
const (
	MasterLocal      MasterKind = "local"
	MasterStandalone MasterKind = "spindle"
	MasterYARN       MasterKind = "yarn"
)

// Master is a parsed --master URL.
type Master struct {
	Kind MasterKind
	// Executors is N of local[N]; 0 when not given.
	Executors int
	// Addrs are the standalone masters' host:port addresses.
	Addrs []string
}

var localRE = regexp.MustCompile(`^local(?:\[(\d+|\*)\])?$`)

// ParseMaster parses local, local[N], spindle://h1:p1,h2:p2 and yarn.
func ParseMaster(s string) (Master, error) {
	s = strings.TrimSpace(s)
	if m := localRE.FindStringSubmatch(s); m != nil {
		out := Master{Kind: MasterLocal}
		if m[1] != "" && m[1] != "*" {
			n, err := strconv.Atoi(m[1])
			if err != nil || n < 1 {
				return Master{}, fmt.Errorf("master %q: local[N] needs N of at least 1", s)
			}
			out.Executors = n
		}
		return out, nil
	}
	if s == "yarn" {
		return Master{Kind: MasterYARN}, nil
	}
	if rest, ok := strings.CutPrefix(s, "spindle://"); ok {
		var addrs []string
		for _, a := range strings.Split(rest, ",") {
			a = strings.TrimSpace(strings.TrimSuffix(a, "/"))
			if a == "" {
				continue
			}
			if _, _, err := net.SplitHostPort(a); err != nil {
				a = net.JoinHostPort(a, "7077")
			}
			addrs = append(addrs, a)
		}
		if len(addrs) == 0 {
			return Master{}, fmt.Errorf("master %q: name at least one master, as in spindle://m1:7077,m2:7077", s)
		}
		return Master{Kind: MasterStandalone, Addrs: addrs}, nil
	}
	return Master{}, fmt.Errorf("unknown master URL %q: want local, local[N], spindle://host:port[,host:port...] or yarn", s)
}
