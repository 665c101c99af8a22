package predict

import (
	"encoding/json"
	"fmt"
	"os"
)

// SpecVersion is the version of the worker's spec this package writes.
const SpecVersion = 1

// SpecFile is the name of the worker's spec among the job's files.
const SpecFile = "predict.json"

// WorkerModule is the Python module executors run: the spindle package's
// predict worker.
const WorkerModule = "spindle.predict"

// Spec is what each executor's predict worker is told: the model (a file
// shipped with the job), how to feed it, and where to write.
type Spec struct {
	Version int    `json:"version"`
	Model   string `json:"model"`
	Output  string `json:"output"`
	// Threads bounds ONNX Runtime's threads per worker (the executor's
	// cores); 0 lets it choose.
	Threads int `json:"threads"`
	Binding
}

// WriteSpec writes spec as JSON at path.
func WriteSpec(path string, spec Spec) error {
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write the predict spec %s: %w", path, err)
	}
	return nil
}
