package fsys

import (
	"context"
	"errors"
	"net"
)

// unresolvable returns the lookup error of the first namenode host when
// no host of addrs resolves: a name the DNS does not know is a
// configuration error, which no retry mends. It returns nil when a host
// resolves, or when the DNS could not say (a timeout is worth retrying).
func unresolvable(ctx context.Context, addrs []string) error {
	var first error
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			host = a
		}
		_, err = net.DefaultResolver.LookupHost(ctx, host)
		var de *net.DNSError
		if err == nil || !errors.As(err, &de) || !de.IsNotFound {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}
