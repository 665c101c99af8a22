package driver

import (
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func TestParseMaster(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Master
		wantErr string
	}{
		{in: "local", want: Master{Kind: MasterLocal}},
		{in: "local[4]", want: Master{Kind: MasterLocal, Executors: 4}},
		{in: "local[*]", want: Master{Kind: MasterLocal, Executors: runtime.NumCPU()}},
		{in: "yarn", want: Master{Kind: MasterYARN}},
		{in: "spindle://m1:7077,m2:7078", want: Master{Kind: MasterStandalone, Addrs: []string{"m1:7077", "m2:7078"}}},
		{in: "spindle://m1,m2/", want: Master{Kind: MasterStandalone, Addrs: []string{"m1:7077", "m2:7077"}}},
		{in: "spindle://[::1]", want: Master{Kind: MasterStandalone, Addrs: []string{"[::1]:7077"}}},
		{in: "spindle://[::1]:7078,[fe80::1]", want: Master{Kind: MasterStandalone, Addrs: []string{"[::1]:7078", "[fe80::1]:7077"}}},
		{in: "spindle://::1", wantErr: "in brackets"},
		{in: "spindle://m1:70000", wantErr: "1 to 65535"},
		{in: "spindle://m1:0", wantErr: "1 to 65535"},
		{in: "spindle://m1:x", wantErr: "1 to 65535"},
		{in: "spindle://:7077", wantErr: "no host"},
		{in: "local[0]", wantErr: "at least 1"},
		{in: "spindle://", wantErr: "at least one master"},
		{in: "mesos://x:5050", wantErr: `unknown master URL "mesos://x:5050"`},
		{in: "locall", wantErr: "unknown master URL"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseMaster(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseMaster(%q) = %v, want error containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseMaster(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
}
