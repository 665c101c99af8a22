package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestBuildInfo(t *testing.T) {
	const sha = "0123456789abcdef0123456789abcdef01234567"
	vcs := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: sha}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		name string
		set  buildInfo
		info *debug.BuildInfo
		want buildInfo
	}{
		{"linker flags win", buildInfo{Version: "v0.4.0", Commit: "abc"}, vcs,
			buildInfo{Version: "v0.4.0", Commit: "abc", GoVersion: "go1.99.1"}},
		{"vcs fallback", buildInfo{}, vcs,
			buildInfo{Version: "dev", Commit: sha + "+dirty", GoVersion: "go1.99.1"}},
		{"go install of a release", buildInfo{}, &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "v0.5.1"}},
			buildInfo{Version: "v0.5.1", GoVersion: "go1.99.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fillBuild(tc.set, tc.info); got != tc.want {
				t.Fatalf("fillBuild = %+v, want %+v", got, tc.want)
			}
		})
	}
	line := buildInfo{Version: "v0.4.0", Commit: sha, GoVersion: "go1.99.1"}.String()
	for _, w := range []string{"v0.4.0", "commit " + sha, "go1.99.1"} {
		if !strings.Contains(line, w) {
			t.Errorf("version line %q lacks %q", line, w)
		}
	}
}
