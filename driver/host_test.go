package driver

import (
	"errors"
	"net"
	"testing"
)

// TestPickHost: the documented rule, on a host like a Debian machine whose
// name maps to 127.0.1.1: the named interface's address, else the first
// non-loopback interface that is up, else loopback; never the host name.
func TestPickHost(t *testing.T) {
	ifaces := []hostAddrs{
		{name: "lo", up: true, loopback: true, ips: []net.IP{net.ParseIP("127.0.0.1")}},
		{name: "docker0", up: false, ips: []net.IP{net.ParseIP("172.17.0.1")}},
		{name: "eth0", up: true, ips: []net.IP{net.ParseIP("10.0.0.5")}},
		{name: "ib0", up: true},
	}
	for name, tc := range map[string]struct {
		ifaces []hostAddrs
		iface  string
		want   string
	}{
		"first up non-loopback": {ifaces, "", "10.0.0.5"},
		"named loopback":        {ifaces, "lo", "127.0.0.1"},
		"named interface":       {ifaces, "eth0", "10.0.0.5"},
		"only loopback":         {ifaces[:1], "", "127.0.0.1"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := pickHost(tc.ifaces, tc.iface)
			if err != nil || got != tc.want {
				t.Fatalf("pickHost = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	for _, bad := range []string{"ib0", "wlan9"} {
		if _, err := pickHost(ifaces, bad); !errors.Is(err, ErrConfig) {
			t.Errorf("interface %s: %v, want a configuration error", bad, err)
		}
	}
}

func TestAdvertiseAddr(t *testing.T) {
	any := &net.TCPAddr{IP: net.IPv4zero, Port: 4000}
	if got, _ := advertiseAddr("10.0.0.5", any); got != "10.0.0.5:4000" {
		t.Errorf("advertised %s", got)
	}
	if got, _ := advertiseAddr("", &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 4000}); got != "127.0.0.1:4000" {
		t.Errorf("advertised %s", got)
	}
}
