package rdma

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseFilter(t *testing.T) {
	tests := []struct {
		spec string
		in   map[string]bool // "dev:port" → selected
		err  string
	}{
		{"", map[string]bool{"mlx5_0:1": true, "anything:2": true}, ""},
		{"mlx5", map[string]bool{"mlx5_0:1": true, "mlx5_1:2": true, "mlx4_0:1": false}, ""},
		{"=mlx5_1", map[string]bool{"mlx5_1:1": true, "mlx5_10:1": false, "mlx5_0:1": false}, ""},
		{"mlx5_0:1,mlx5_1", map[string]bool{"mlx5_0:1": true, "mlx5_0:2": false, "mlx5_1:2": true}, ""},
		{"^mlx5_1", map[string]bool{"mlx5_0:1": true, "mlx5_1:1": false, "mlx5_10:1": false}, ""},
		{"^=mlx5_1", map[string]bool{"mlx5_0:1": true, "mlx5_1:1": false, "mlx5_10:1": true}, ""},
		{"mlx5_0:x", nil, `port "x" is not a port number`},
		{"mlx5_0:0", nil, `port "0" is not a port number`},
		{"a,,b", nil, "no device name"},
		{"^", nil, "names no device"},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			f, err := ParseFilter(tc.spec)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range tc.in {
				dev, port, _ := strings.Cut(k, ":")
				if got := f.Match(dev, atoi(port)); got != want {
					t.Errorf("Match(%s) = %v, want %v", k, got, want)
				}
			}
		})
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": ModeAuto, "auto": ModeAuto, "REQUIRED": ModeRequired, " off ": ModeOff} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseMode("on"); err == nil || !strings.Contains(err.Error(), "want auto, required or off") {
		t.Errorf("ParseMode(on) = %v", err)
	}
}

// TestDiscoverHints runs the whole of a rank's discovery on each fake tree
// and checks the environment its training process would get.
func TestDiscoverHints(t *testing.T) {
	tests := []struct {
		name     string
		tree     string
		mode     Mode
		devices  string
		userSet  []string
		want     map[string]string
		summary  string
		required bool // Discover fails with ErrNoDevice
	}{
		{
			name: "roce", tree: "roce-mlx5", mode: ModeAuto,
			want: map[string]string{
				"NCCL_IB_HCA": "=mlx5_0:1", "UCX_NET_DEVICES": "mlx5_0:1", "NCCL_IB_GID_INDEX": "3",
				"NCCL_SOCKET_IFNAME": "=eth2", "GLOO_SOCKET_IFNAME": "eth2", "SPINDLE_COLLECTIVE_LINK": "ucx",
			},
			summary: "mlx5_0 port 1 RoCE v2 on eth2, 100 Gb/s",
		},
		{
			name: "the user's own choices are kept", tree: "roce-mlx5", mode: ModeAuto,
			userSet: []string{"NCCL_IB_GID_INDEX", "GLOO_SOCKET_IFNAME", "SPINDLE_COLLECTIVE_LINK"},
			want: map[string]string{
				"NCCL_IB_HCA": "=mlx5_0:1", "UCX_NET_DEVICES": "mlx5_0:1", "NCCL_SOCKET_IFNAME": "=eth2",
			},
			summary: "mlx5_0 port 1 RoCE v2 on eth2, 100 Gb/s",
		},
		{
			name: "two ib hcas", tree: "ib-two-hca", mode: ModeRequired,
			// The IPoIB interfaces carry no address the tree knows of, so
			// the socket interfaces are left to the executor's choice.
			want:    map[string]string{"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1", "UCX_NET_DEVICES": "mlx5_0:1,mlx5_1:1", "SPINDLE_COLLECTIVE_LINK": "ucx:required"},
			summary: "mlx5_0 port 1 InfiniBand on ib0, 200 Gb/s; mlx5_1 port 1 InfiniBand on ib1, 200 Gb/s",
		},
		{
			name: "one hca excluded", tree: "ib-two-hca", mode: ModeAuto, devices: "^mlx5_0",
			want:    map[string]string{"NCCL_IB_HCA": "=mlx5_1:1", "UCX_NET_DEVICES": "mlx5_1:1", "SPINDLE_COLLECTIVE_LINK": "ucx"},
			summary: "mlx5_1 port 1 InfiniBand on ib1, 200 Gb/s",
		},
		{
			name: "bond", tree: "roce-bond", mode: ModeAuto,
			want: map[string]string{
				"NCCL_IB_HCA": "=mlx5_bond_0:1", "UCX_NET_DEVICES": "mlx5_bond_0:1", "NCCL_IB_GID_INDEX": "3",
				"NCCL_SOCKET_IFNAME": "=bond0", "GLOO_SOCKET_IFNAME": "bond0", "SPINDLE_COLLECTIVE_LINK": "ucx",
			},
			summary: "mlx5_bond_0 port 1 RoCE v2 on bond0, 50 Gb/s",
		},
		{
			name: "no rdma", tree: "none", mode: ModeAuto,
			want:    map[string]string{"NCCL_IB_DISABLE": "1", "UCX_TLS": "^ib", "SPINDLE_COLLECTIVE_LINK": "ucx:declined"},
			summary: "TCP (no RDMA devices)",
		},
		{
			name: "no rdma, required", tree: "none", mode: ModeRequired,
			want:     map[string]string{"NCCL_IB_DISABLE": "1", "UCX_TLS": "^ib", "SPINDLE_COLLECTIVE_LINK": "ucx:required"},
			summary:  "TCP (no RDMA devices)",
			required: true,
		},
		{
			name: "filtered to nothing, required", tree: "roce-mlx5", mode: ModeRequired, devices: "mlx4",
			want:     map[string]string{"NCCL_IB_DISABLE": "1", "UCX_TLS": "^ib", "SPINDLE_COLLECTIVE_LINK": "ucx:required"},
			summary:  "TCP (no usable RDMA port: mlx5_0 port 1 not in spindle.rdma.devices=mlx4)",
			required: true,
		},
		{
			name: "off", tree: "roce-mlx5", mode: ModeOff,
			want:    map[string]string{"NCCL_IB_DISABLE": "1", "UCX_TLS": "^ib"},
			summary: "TCP (spindle.rdma.mode is off)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Mode: tc.mode, Devices: tc.devices, Sysfs: Sysfs{Root: fakeTree(t, tc.tree)}}
			userSet := func(k string) bool {
				for _, u := range tc.userSet {
					if u == k {
						return true
					}
				}
				return false
			}
			p, err := Discover(cfg, userSet)
			if tc.required {
				if !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), "spindle.rdma.mode is required") {
					t.Fatalf("got %v, want ErrNoDevice", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.Env, tc.want) {
				t.Fatalf("env:\n got %v\nwant %v", p.Env, tc.want)
			}
			if p.Summary != tc.summary {
				t.Fatalf("summary %q, want %q", p.Summary, tc.summary)
			}
			for k := range p.Env {
				if !contains(HintNames, k) {
					t.Fatalf("%s is not in HintNames", k)
				}
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg  Config
		says string
	}{
		{Config{Mode: "sometimes"}, "spindle.rdma.mode"},
		{Config{Mode: ModeAuto, Devices: "mlx5_0:one"}, "spindle.rdma.devices"},
	}
	for _, tc := range tests {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: got %v, want an error naming %s", tc.cfg, err, tc.says)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}
