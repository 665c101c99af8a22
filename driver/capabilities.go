package driver

import (
	"context"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// A ClusterManager does four things every manager must (request, release,
// events, close). What else it can do differs from one to the next, so the
// driver asks for each optional capability below by type assertion, and
// goes without it when the manager lacks it. Each implementation asserts
// at compile time the capabilities it means to offer (var _ RoomReporter =
// (*ClusterManager)(nil)), so renaming a method cannot silently turn a
// capability off; Capabilities lists what a manager offers.

// RoomReporter is a cluster manager that can say how many more executors
// of a shape it could start now. An elastic job grows only on a manager
// that reports room (PolicyElastic).
type RoomReporter interface {
	// Room returns how many more executors like spec the cluster could
	// start now, without waiting for anything to end.
	Room(ctx context.Context, spec ExecutorSpec) (int, error)
}

// FileSharer is a cluster manager whose executors see the submit host's
// file system (local executors), so shipped files need not travel through
// the driver.
type FileSharer interface {
	// SharesFileSystem reports whether executors read the submit host's
	// files where they stand.
	SharesFileSystem() bool
}

// OutputDeliverer is a cluster manager that brings its executors' output
// to the driver's console itself: local executors write into pipes the
// driver reads; standalone workers serve their executors' log files.
// Executors of other managers forward their output in their heartbeats.
type OutputDeliverer interface {
	// DeliversOutput reports whether executors' output reaches the
	// console without the driver's help.
	DeliversOutput() bool
}

// InputShower is a cluster manager that shows its users where a job takes
// pushed input (the standalone cluster's spindle status does).
type InputShower interface {
	// ShowInput records the URI producers push the job's input to. It
	// must not block.
	ShowInput(uri string)
}

// LocalizingShower is a cluster manager that shows its users the ranks
// still fetching and unpacking their files (the standalone cluster's
// spindle status does; YARN's and local jobs' read the driver's web UI).
type LocalizingShower interface {
	// ShowLocalizing records the ranks localizing now, a line each ("rank
	// 1 on HOST: localizing: N of M bytes"); none once every rank is done.
	// It must not block.
	ShowLocalizing(lines []string)
}

// NodeNamer is a cluster manager that knows where it placed each
// executor, by the names ExecutorSpec.ExcludedHosts takes (a standalone
// worker's id, finer than its host).
type NodeNamer interface {
	// NodeOf returns where the executor runs, or "" when not known.
	NodeOf(executorID string) string
}

// TrackingURLSetter is a cluster manager that links its own pages to the
// driver's web UI: YARN shows it as the application's tracking URL.
type TrackingURLSetter interface {
	// SetTrackingURL records the web UI's URL. It must not block.
	SetTrackingURL(url string)
}

// ProgressReporter is a cluster manager that shows a job's progress to
// its users: YARN's application progress, which its web UI and `yarn
// application -status` show as a percentage.
type ProgressReporter interface {
	// ReportProgress says how much of the job is done, from 0 to 1.
	ReportProgress(ctx context.Context, done float64) error
}

// CredentialKeeper is a ClusterManager that keeps its executors' Hadoop
// delegation tokens fresh (YARN or standalone on a Kerberized Hadoop
// cluster): the driver hands the newest credentials to each executor as it
// registers and in the answer to any heartbeat that reports an older
// generation, and tells the keeper once every running executor uses a
// generation, so that older tokens can be cancelled.
type CredentialKeeper interface {
	// ExecutorCredentials returns the newest credentials for executors,
	// or nil when there are none.
	ExecutorCredentials() *driverpb.Credentials
	// CredentialsInUse says that every running executor of the job uses
	// generation or a newer one. It must not block.
	CredentialsInUse(generation int64)
}

// JobNamer is a cluster manager that gives each job its id before
// anything is submitted (YARN's application id), so that the job carries
// one id in its logs, event log, web UI, history and on the cluster.
type JobNamer interface {
	// JobID reserves and returns the job's id on the cluster.
	JobID(ctx context.Context) (string, error)
}

// Capability names one optional capability of a ClusterManager, by the
// interface that offers it.
type Capability string

// The optional capabilities, each named after its interface.
const (
	CapRoom        Capability = "RoomReporter"
	CapFileSharing Capability = "FileSharer"
	CapOutput      Capability = "OutputDeliverer"
	CapInput       Capability = "InputShower"
	CapLocalizing  Capability = "LocalizingShower"
	CapNodeNames   Capability = "NodeNamer"
	CapTrackingURL Capability = "TrackingURLSetter"
	CapProgress    Capability = "ProgressReporter"
	CapCredentials Capability = "CredentialKeeper"
	CapJobID       Capability = "JobNamer"
)

// Capabilities lists the optional capabilities cm offers, in the order of
// the constants above. A FileSharer or OutputDeliverer counts only when it
// says yes.
func Capabilities(cm ClusterManager) []Capability {
	var caps []Capability
	if _, ok := cm.(RoomReporter); ok {
		caps = append(caps, CapRoom)
	}
	if sharesFileSystem(cm) {
		caps = append(caps, CapFileSharing)
	}
	if outputReachesConsole(cm) {
		caps = append(caps, CapOutput)
	}
	if _, ok := cm.(InputShower); ok {
		caps = append(caps, CapInput)
	}
	if _, ok := cm.(LocalizingShower); ok {
		caps = append(caps, CapLocalizing)
	}
	if _, ok := cm.(NodeNamer); ok {
		caps = append(caps, CapNodeNames)
	}
	if _, ok := cm.(TrackingURLSetter); ok {
		caps = append(caps, CapTrackingURL)
	}
	if _, ok := cm.(ProgressReporter); ok {
		caps = append(caps, CapProgress)
	}
	if _, ok := cm.(CredentialKeeper); ok {
		caps = append(caps, CapCredentials)
	}
	if _, ok := cm.(JobNamer); ok {
		caps = append(caps, CapJobID)
	}
	return caps
}
