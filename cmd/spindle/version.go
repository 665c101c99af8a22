package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/spindle-ml/spindle/rdma/ucx"
)

// Set at build time by the Makefile:
//
//	go build -ldflags "-X main.version=v0.4.0 -X main.commit=<git sha>"
//
// A plain go build leaves them empty; the module version and the VCS
// information Go records in the binary fill in what it can.
var (
	version string
	commit  string
)

// buildInfo is what identifies a spindle binary.
type buildInfo struct {
	Version   string // a release (v0.4.0) or git describe output; "dev" when unknown
	Commit    string // the full commit hash, "+dirty" when built from a modified tree
	GoVersion string // the Go release that compiled the binary
}

// currentBuild reads the linker-set variables, falling back on the build
// information Go embeds (module version, vcs.revision, vcs.modified).
func currentBuild() buildInfo {
	b := buildInfo{Version: version, Commit: commit, GoVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		if b.Version == "" {
			b.Version = "dev"
		}
		return b
	}
	return fillBuild(b, info)
}

// fillBuild fills what b lacks from info.
func fillBuild(b buildInfo, info *debug.BuildInfo) buildInfo {
	if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		b.Version = info.Main.Version
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	if info.GoVersion != "" {
		b.GoVersion = info.GoVersion
	}
	if b.Commit == "" {
		dirty := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if b.Commit != "" && dirty {
			b.Commit += "+dirty"
		}
	}
	return b
}

// String is the one line spindle version prints.
func (b buildInfo) String() string {
	c := b.Commit
	if c == "" {
		c = "unknown"
	}
	return fmt.Sprintf("%s (commit %s, %s, %s/%s)", b.Version, c, b.GoVersion, runtime.GOOS, runtime.GOARCH)
}

func versionString() string { return currentBuild().String() }

// ucxLine says whether this binary can use UCX for Spindle's collectives
// (it loads libucp at run time): "ucx: available (1.13.1)" with the
// loaded library's version, or "ucx: not available: <why>".
func ucxLine() string {
	ok, detail := ucx.Available()
	if !ok {
		return detail
	}
	return fmt.Sprintf("ucx: available (%s)", strings.TrimPrefix(detail, "UCX "))
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print Spindle's version, the commit it was built from and the Go release that built it, and whether it can use UCX",
		Action: func(c *cli.Context) error {
			fmt.Fprintf(c.App.Writer, "spindle %s\n%s\n", versionString(), ucxLine())
			return nil
		},
	}
}
