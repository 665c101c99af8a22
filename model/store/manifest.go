package store

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"
)

// FormatONNX is the only model format the store holds today.
const FormatONNX = "onnx"

// ModelFile is the model's file inside a version directory.
const ModelFile = "model.onnx"

// ManifestFile is the manifest's file inside a version directory.
const ManifestFile = "manifest.json"

// Manifest describes one version of a model: what its graph takes and
// gives, which job and checkpoint produced it, the feed it was trained on,
// and a size and sha256 for every file of the version. It is stored as
// manifest.json beside the model.
type Manifest struct {
	// Name and Version are the model's place in the store; Publish sets them.
	Name    string `json:"name"`
	Version int    `json:"version"`
	// Created is when the version was published (RFC 3339, UTC); Publish
	// sets it when empty.
	Created string `json:"created"`
	// JobID is the Spindle job that trained the model, when known.
	JobID string `json:"job_id,omitempty"`
	// Checkpoint is the checkpoint the model was exported from, when any.
	Checkpoint string `json:"checkpoint,omitempty"`
	// Format is the model's format: "onnx".
	Format string `json:"format"`
	// Inputs and Outputs are the graph's inputs and outputs.
	Inputs  []Tensor `json:"inputs"`
	Outputs []Tensor `json:"outputs"`
	// Feed is the feed the model was trained on: the columns that make its
	// inputs and the label column. Nil when unknown.
	Feed *Feed `json:"feed,omitempty"`
	// Metrics are the last metrics the job reported (spindle.report,
	// task.Report), by name.
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Frameworks are the versions of the libraries that made the model,
	// by name (for example "torch": "1.13.1", "spindle": "0.9.0").
	Frameworks map[string]string `json:"frameworks,omitempty"`
	// Files lists every file of the version but the manifest itself;
	// Publish fills it in.
	Files []File `json:"files"`
}

// Tensor is one input or output of a model's graph.
type Tensor struct {
	// Name is the graph's name for it.
	Name string `json:"name"`
	// Type is the ONNX element type, lower case: "float", "double",
	// "int64", "string", ...
	Type string `json:"type"`
	// Shape has one entry per dimension: its size, or -1 where the size
	// is not fixed (a batch dimension).
	Shape []int64 `json:"shape"`
}

// Feed is the part of a job's feed a model was trained on.
type Feed struct {
	// Schema lists the feed's columns the model's inputs come from, in
	// order, each with its Arrow type ("float32", "int64", ...).
	Schema []Column `json:"schema"`
	// Label is the label column, empty when there was none.
	Label string `json:"label,omitempty"`
}

// Column is one column of a feed's schema.
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// File is one file of a version: its path relative to the version's
// directory, its size and the hex sha256 of its bytes.
type File struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// namePattern is what a model's name may look like: one path element,
// safe on every file system and in a URI.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// CheckName reports whether name can name a model.
func CheckName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("model name %q: want letters, digits, '.', '_' or '-' (at most 128, not starting with a dot or dash): %w", name, ErrBadName)
	}
	return nil
}

// Lookup returns the manifest's input or output tensor called name.
func (m *Manifest) Lookup(name string) (Tensor, bool) {
	for _, ts := range [][]Tensor{m.Inputs, m.Outputs} {
		for _, t := range ts {
			if t.Name == name {
				return t, true
			}
		}
	}
	return Tensor{}, false
}

// validate checks what a reader relies on, naming where the manifest came from.
func (m *Manifest) validate(where string) error {
	switch {
	case m.Format != FormatONNX:
		return fmt.Errorf("%s: format %q: want %q", where, m.Format, FormatONNX)
	case len(m.Inputs) == 0:
		return fmt.Errorf("%s: the manifest lists no inputs", where)
	case len(m.Outputs) == 0:
		return fmt.Errorf("%s: the manifest lists no outputs", where)
	}
	return nil
}

// decodeManifest parses a manifest read from where.
func decodeManifest(b []byte, where string) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if err := m.validate(where); err != nil {
		return nil, err
	}
	return &m, nil
}

// now is the publish time, in UTC, to the second, as the manifest stores it.
func now() string { return time.Now().UTC().Format(time.RFC3339) }
