package driver

import (
	"reflect"
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
		{in: "local[*]", want: Master{Kind: MasterLocal}},
		{in: "yarn", want: Master{Kind: MasterYARN}},
		{in: "spindle://m1:7077,m2:7078", want: Master{Kind: MasterStandalone, Addrs: []string{"m1:7077", "m2:7078"}}},
		{in: "spindle://m1,m2/", want: Master{Kind: MasterStandalone, Addrs: []string{"m1:7077", "m2:7077"}}},
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
