package store

import "testing"

func TestSplitRef(t *testing.T) {
	for _, tc := range []struct{ ref, dir, in string }{
		{"ctr", "", "ctr"},
		{"ctr/3", "", "ctr/3"},
		{"models/ctr", "models", "ctr"},
		{"models/ctr/3", "models", "ctr/3"},
		{"/srv/models/ctr", "/srv/models", "ctr"},
		{"/srv/models/ctr/12/", "/srv/models", "ctr/12"},
		{"hdfs://nn:8020/models/ctr/2", "hdfs://nn:8020/models", "ctr/2"},
		{"hdfs://nn/models/ctr", "hdfs://nn/models", "ctr"},
		{"file:///m/ctr", "file:///m", "ctr"},
	} {
		dir, in := SplitRef(tc.ref)
		if dir != tc.dir || in != tc.in {
			t.Errorf("SplitRef(%q) = %q, %q; want %q, %q", tc.ref, dir, in, tc.dir, tc.in)
		}
	}
}
