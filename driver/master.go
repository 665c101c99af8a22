package driver

import (
	"fmt"
	"net"
	"regexp"
	"runtime"
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
	// Executors is N of local[N] (the number of CPUs for local[*]); 0
	// when not given.
	Executors int
	// Addrs are the standalone masters' host:port addresses.
	Addrs []string
}

var localRE = regexp.MustCompile(`^local(?:\[(\d+|\*)\])?$`)

// DefaultStandalonePort is the standalone masters' port when a
// spindle:// URL leaves it out.
const DefaultStandalonePort = "7077"

// ParseMaster parses local, local[N], local[*] (one executor per CPU),
// spindle://h1:p1,h2:p2 and yarn.
func ParseMaster(s string) (Master, error) {
	s = strings.TrimSpace(s)
	if m := localRE.FindStringSubmatch(s); m != nil {
		out := Master{Kind: MasterLocal}
		if m[1] == "*" {
			out.Executors = runtime.NumCPU()
		}
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
			addr, err := standaloneAddr(a)
			if err != nil {
				return Master{}, fmt.Errorf("master %q: %w", s, err)
			}
			addrs = append(addrs, addr)
		}
		if len(addrs) == 0 {
			return Master{}, fmt.Errorf("master %q: name at least one master, as in spindle://m1:7077,m2:7077", s)
		}
		return Master{Kind: MasterStandalone, Addrs: addrs}, nil
	}
	return Master{}, fmt.Errorf("unknown master URL %q: want local, local[N], spindle://host:port[,host:port...] or yarn", s)
}

// standaloneAddr turns one master of a spindle:// URL (host, host:port,
// [v6], [v6]:port) into host:port.
func standaloneAddr(a string) (string, error) {
	host, port, err := net.SplitHostPort(a)
	switch {
	case err == nil:
	case strings.HasPrefix(a, "[") && strings.HasSuffix(a, "]"):
		host, port = a[1:len(a)-1], DefaultStandalonePort
	case strings.Count(a, ":") > 1:
		return "", fmt.Errorf("%q: put an IPv6 address in brackets, as in [%s]:%s", a, a, DefaultStandalonePort)
	case strings.Contains(a, ":"):
		return "", fmt.Errorf("%q is not host:port", a)
	default:
		host, port = a, DefaultStandalonePort
	}
	if host == "" {
		return "", fmt.Errorf("%q names no host", a)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%q: the port is not a number from 1 to 65535", a)
	}
	return net.JoinHostPort(host, port), nil
}
