package rdma

import (
	"errors"
	"net/netip"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/spindle-ml/spindle/internal/sysfstest"
)

// fakeTree unpacks testdata/name.txtar (a sysfs tree) into a temporary
// directory and returns it.
func fakeTree(t *testing.T, name string) string {
	t.Helper()
	return sysfstest.Unpack(t, filepath.Join("testdata", name+".txtar"))
}

func TestDevicesFakeTrees(t *testing.T) {
	tests := []struct {
		tree  string
		want  []string // Port.String of every port, in order
		chars map[string][]string
		addrs map[string][]netip.Addr // by netdev
	}{
		{
			tree:  "roce-mlx5",
			want:  []string{"mlx5_0 port 1 RoCE v2 on eth2, 100 Gb/s"},
			chars: map[string][]string{"mlx5_0": {"/dev/infiniband/uverbs0"}},
			addrs: map[string][]netip.Addr{"eth2": {netip.MustParseAddr("10.10.0.2")}},
		},
		{
			tree: "ib-two-hca",
			want: []string{"mlx5_0 port 1 InfiniBand on ib0, 200 Gb/s", "mlx5_1 port 1 InfiniBand on ib1, 200 Gb/s"},
			chars: map[string][]string{
				"mlx5_0": {"/dev/infiniband/uverbs0"},
				"mlx5_1": {"/dev/infiniband/uverbs1"},
			},
			addrs: map[string][]netip.Addr{},
		},
		{
			tree:  "roce-bond",
			want:  []string{"mlx5_bond_0 port 1 RoCE v2 on bond0, 50 Gb/s"},
			chars: map[string][]string{"mlx5_bond_0": {"/dev/infiniband/uverbs0"}},
			addrs: map[string][]netip.Addr{"bond0": {netip.MustParseAddr("192.168.10.5")}},
		},
		{tree: "none"},
	}
	for _, tc := range tests {
		t.Run(tc.tree, func(t *testing.T) {
			devs, err := Sysfs{Root: fakeTree(t, tc.tree)}.Devices()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range devs {
				if !reflect.DeepEqual(d.CharDevices, tc.chars[d.Name]) {
					t.Errorf("%s: char devices %v, want %v", d.Name, d.CharDevices, tc.chars[d.Name])
				}
				if d.PCIDevice == "" || d.NodeGUID == "" || d.HCAType == "" {
					t.Errorf("%s: identity not read: %+v", d.Name, d)
				}
				for _, p := range d.Ports {
					got = append(got, p.String())
					if want := tc.addrs[p.Netdev]; len(want) > 0 && !reflect.DeepEqual(p.Addrs, want) {
						t.Errorf("%s: addresses %v, want %v (from the RoCE GIDs)", p, p.Addrs, want)
					}
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ports:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestPortDetails(t *testing.T) {
	devs, err := Sysfs{Root: fakeTree(t, "roce-mlx5")}.Devices()
	if err != nil {
		t.Fatal(err)
	}
	p := devs[0].Ports[0]
	if p.State != "ACTIVE" || p.PhysState != "LinkUp" || p.LinkLayer != LinkLayerEthernet || p.LID != 0 {
		t.Fatalf("port: %+v", p)
	}
	if len(p.GIDs) != 4 {
		t.Fatalf("GIDs %+v, want the 4 non-zero entries", p.GIDs)
	}
	g, ok := p.RoCEv2GID()
	if !ok || g.Index != 3 {
		t.Fatalf("RoCE v2 GID %+v %v, want index 3 (the IPv4-mapped one)", g, ok)
	}
	if devs[0].PCIDevice != "0000:3b:00.0" {
		t.Fatalf("PCI device %q", devs[0].PCIDevice)
	}

	devs, err = Sysfs{Root: fakeTree(t, "ib-two-hca")}.Devices()
	if err != nil {
		t.Fatal(err)
	}
	ib := devs[1].Ports[0]
	if ib.LID != 0x13 || ib.RoCE() {
		t.Fatalf("IB port: %+v", ib)
	}
	if _, ok := ib.RoCEv2GID(); ok {
		t.Fatal("an InfiniBand port has no RoCE v2 GID")
	}

	devs, err = Sysfs{Root: fakeTree(t, "roce-bond")}.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if got := devs[0].Ports[0].Slaves; !reflect.DeepEqual(got, []string{"ens1f0", "ens1f1"}) {
		t.Fatalf("bond slaves %v", got)
	}
	// Either slave maps back to the bonded device.
	if p, ok := DeviceForNetdev(devs, "ens1f1"); !ok || p.Device != "mlx5_bond_0" {
		t.Fatalf("DeviceForNetdev(ens1f1) = %v, %v", p, ok)
	}
	if _, ok := DeviceForNetdev(devs, "eth9"); ok {
		t.Fatal("DeviceForNetdev found a device for an unknown interface")
	}
}

// TestAddrsHook checks that a caller-supplied address lookup wins over
// what the GIDs say, which is how a host's real interfaces are read.
func TestAddrsHook(t *testing.T) {
	want := []netip.Addr{netip.MustParseAddr("172.16.0.9")}
	s := Sysfs{Root: fakeTree(t, "ib-two-hca"), Addrs: func(netdev string) ([]netip.Addr, error) {
		if netdev == "ib0" {
			return want, nil
		}
		return nil, errors.New("no such interface")
	}}
	devs, err := s.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if got := devs[0].Ports[0].Addrs; !reflect.DeepEqual(got, want) {
		t.Fatalf("ib0 addresses %v, want %v", got, want)
	}
	if got := devs[1].Ports[0].Addrs; len(got) != 0 {
		t.Fatalf("ib1 addresses %v, want none", got)
	}
}

// TestHostListersAgree checks, on the machine the tests run on, that the
// tree reader at "/" finds what rdmamap finds: the rules the fake trees
// are read with are the ones the real host is read with.
func TestHostListersAgree(t *testing.T) {
	s := Sysfs{Root: "/"}
	viaRdmamap, err := s.devices(rdmamapLister{})
	if err != nil {
		t.Fatal(err)
	}
	viaTree, err := s.devices(treeLister{s})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(viaRdmamap, viaTree) {
		t.Fatalf("rdmamap found %+v, the tree reader %+v", viaRdmamap, viaTree)
	}
	if len(viaRdmamap) == 0 {
		t.Logf("this host has no RDMA devices; both listers agree on none")
	}
}

func TestGIDIPv4(t *testing.T) {
	tests := []struct {
		gid  string
		want string
	}{
		{"0000:0000:0000:0000:0000:ffff:0a0a:0002", "10.10.0.2"},
		{"fe80:0000:0000:0000:ba59:9fff:fea1:b2c3", ""},
		{"garbage", ""},
	}
	for _, tc := range tests {
		a, ok := GID{GID: tc.gid}.IPv4()
		if got := ""; ok {
			got = a.String()
			if got != tc.want {
				t.Errorf("%s: %s, want %q", tc.gid, got, tc.want)
			}
		} else if tc.want != "" {
			t.Errorf("%s: no IPv4, want %s", tc.gid, tc.want)
		}
	}
}
