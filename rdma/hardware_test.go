package rdma

import (
	"os"
	"strings"
	"testing"
)

// needHardware skips a test of the hardware tier unless
// SPINDLE_TEST_RDMA=1 and this host has an RDMA device, saying which is
// missing.
func needHardware(t *testing.T) []Device {
	t.Helper()
	if os.Getenv("SPINDLE_TEST_RDMA") != "1" {
		t.Skip("hardware tier: set SPINDLE_TEST_RDMA=1 on a host with an RDMA device to run")
	}
	devs, err := Sysfs{}.Devices()
	if err != nil {
		t.Fatalf("read this host's RDMA devices: %v", err)
	}
	if len(devs) == 0 {
		t.Skip("hardware tier: SPINDLE_TEST_RDMA=1 but this host has no RDMA device (/sys/class/infiniband is empty)")
	}
	return devs
}

// TestHostDevicesHardware reads the running host's devices through
// rdmamap: each has a verbs node and ports, and a job in required mode
// gets hints that name the ports it selected.
func TestHostDevicesHardware(t *testing.T) {
	devs := needHardware(t)
	for _, d := range devs {
		t.Logf("%s: %d ports, %v", d.Name, len(d.Ports), d.CharDevices)
		if len(d.Ports) == 0 {
			t.Errorf("%s has no ports", d.Name)
		}
		if len(d.CharDevices) == 0 {
			t.Errorf("%s has no /dev/infiniband node: is ib_uverbs loaded?", d.Name)
		}
		for _, p := range d.Ports {
			t.Log(p)
		}
	}
	p, err := Discover(Config{Mode: ModeRequired}, nil)
	if err != nil {
		t.Skipf("hardware tier: no usable port here (%v)", err)
	}
	for _, port := range p.Selection.Ports {
		name := port.Device + ":"
		if !strings.Contains(p.Env[EnvNCCLIBHCA], name) || !strings.Contains(p.Env[EnvUCXNetDevices], name) {
			t.Errorf("hints %v do not name %s", p.Env, port)
		}
	}
	if p.Env[EnvCollectiveLink] != LinkUCXRequired {
		t.Errorf("%s = %q, want %q", EnvCollectiveLink, p.Env[EnvCollectiveLink], LinkUCXRequired)
	}
}
